"""Upstream issues and pull requests found for findings groups (by group id), cited in their Markdown.

Contract: `upstream_links(group_id)` is the list of (url, title) of the
upstream transformers or PyTorch threads a person found for that root
cause (searched, read, and judged to be about the same failure); [] for a
group with none. Only what was actually found is listed: a link is
evidence, never a guess. Torch-free.
"""

from __future__ import annotations

CAPTURING_LOCK = [  # output_capturing's lazy hook installation under a lock: a graph break when compiled cold
    ("https://github.com/huggingface/transformers/pull/44638",
     "transformers#44638 Fix output capturing for Backbones (the lock makes hook installation a graph break "
     "when the model is compiled before any forward)"),
    ("https://github.com/huggingface/transformers/pull/44614",
     "transformers#44614 [Compile] Fix capture outputs during compile (closed, superseded by #44638)"),
]

# Searched with the `search` tool (transformers and PyTorch issues and pull requests) for the top ten groups of
# the 5.24 matrix; related threads, not fixes of these exact sites unless the title says so.
UPSTREAM: dict[str, list[tuple[str, str]]] = {
    "data_dependent_guard-5a68b3be": [
        ("https://github.com/huggingface/transformers/pull/45396",
         "transformers#45396 Extract dynamic vision/audio tensors into standalone pure functions (where "
         "vision_utils.get_vision_window_index comes from)"),
        ("https://github.com/pytorch/pytorch/issues/158786",
         "pytorch#158786 Torch export for Qwen2VL failing (a data-dependent error in the vision encoder's "
         "grid-driven code, the same family)"),
    ],
    "data_dependent_guard-de9e685a": [
        ("https://github.com/huggingface/transformers/pull/30311",
         "transformers#30311 Do not drop mask with SDPA for more cases (is_causal decided from the query length "
         "is hard-coded under torch.export)"),
        ("https://github.com/huggingface/transformers/pull/41992",
         "transformers#41992 [PoC] HF exporters (patches SDPA attention with torch._check for export)"),
    ],
    "unsupported-1827035f": CAPTURING_LOCK,
    "call_order-6ce4fc3b": CAPTURING_LOCK,
    "graph_break-2e073c83": CAPTURING_LOCK,
}


def upstream_links(group_id: str) -> list[tuple[str, str]]:
    return list(UPSTREAM.get(group_id, []))
