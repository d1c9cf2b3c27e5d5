"""Deterministic sharding of parametrized cells: `--shard i/N`.

Contract: `select_shard(items, "i/N")` keeps the items whose model group
hashes to share i (1-based) of N. Whole models go to one shard (each tiny
model is built once), the split depends only on node ids, and the N shares
cover every item exactly once.
"""

from __future__ import annotations

import zlib


def parse(spec: str) -> tuple[int, int]:
    try:
        index, total = (int(x) for x in spec.split("/"))
    except ValueError:
        raise ValueError(f"expected i/N (e.g. 1/4), got {spec!r}") from None
    if not 1 <= index <= total:
        raise ValueError(f"expected 1 <= i <= N, got {spec!r}")
    return index, total


def group_of(item) -> str:
    callspec = getattr(item, "callspec", None)
    if callspec and "model_name" in callspec.params:
        return str(callspec.params["model_name"])
    return item.nodeid


def select_shard(items: list, spec: str) -> list:
    index, total = parse(spec)
    return [item for item in items if zlib.crc32(group_of(item).encode()) % total == index - 1]
