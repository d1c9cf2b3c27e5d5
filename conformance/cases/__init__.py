"""Stage 2, build: a tiny model and real sample inputs for each discovered class (`case.build_case`)."""
