"""Stage 5, gate: known failures as data (the ratchet), a change judged against them and against its merge base."""
