"""Generic shrinking rules for audio sub-configs (run after conformance.tiny's).

Contract: `shrink_audio(tree)` takes the already-shrunk `to_dict()` tree and
returns it with audio sizes made tiny while keeping the invariants audio
encoders rely on. Identity for trees without audio parts.
"""

from __future__ import annotations


def shrink_audio(tree: dict) -> dict:
    return tree
