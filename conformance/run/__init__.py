"""Stage 6, run: the pytest plugin that drives every stage, one module per concern (see `plugin`)."""
