"""Stage 4, report: run files (records, the envelope), their diff, and the Markdown matrix."""
