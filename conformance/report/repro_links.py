"""Upstream issues and pull requests found for findings groups (by group id), cited in their Markdown.

Contract: `upstream_links(group_id)` is the list of (url, title) of the
upstream transformers or PyTorch threads a person found for that root
cause (searched, read, and judged to be about the same failure); [] for a
group with none. Only what was actually found is listed: a link is
evidence, never a guess. Torch-free.
"""

from __future__ import annotations

UPSTREAM: dict[str, list[tuple[str, str]]] = {}


def upstream_links(group_id: str) -> list[tuple[str, str]]:
    return list(UPSTREAM.get(group_id, []))
