"""Stage 7, tools: the `conformance` command, `explain` and `bench`."""
