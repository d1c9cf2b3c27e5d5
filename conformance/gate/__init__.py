"""Stage 5, gate: known failures as data (the ratchet) and which classes a transformers change can affect."""
