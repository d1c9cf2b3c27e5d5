"""Stage select: which discovered classes a run checks, and which of them a transformers change can affect."""
