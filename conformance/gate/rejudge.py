"""The name `conformance expectations --judge` (tools/cli.py) imports for `gate.judging.judge_envelope`: judging a
recorded run against the expectations as they are now. Judge with `gate.judging`; this name goes when cli does."""

from conformance.gate.judging import judge_envelope as rejudge

__all__ = ["rejudge"]
