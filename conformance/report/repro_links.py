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
    # Searched again for the 5.24 top ten on 2026-12-04 (the exporters' groups among them).
    "contract-f4afe6db": [
        ("https://github.com/huggingface/transformers/pull/45783",
         "transformers#45783 [generation] Encode multimodal data only once (generate computes the image features "
         "before the first forward: why the decomposition captures no image encoder)"),
        ("https://github.com/huggingface/transformers/pull/41992",
         "transformers#41992 [PoC] HF exporters (added export_for_generation and its multimodal decomposition)"),
    ],
    "export_error-dd71757c": [
        ("https://github.com/tenstorrent/tt-xla/pull/3688",
         "tt-xla#3688 Adding support for sliding window attention (the static sliding layer's cumulative length "
         "is a Python int that changes every decode step: specialised by dynamo, baked into an export's spec)"),
        ("https://github.com/huggingface/transformers/pull/46856",
         "transformers#46856 Fix expanded dim in the cache's cumulative length (how the static layers carry it)"),
    ],
    "export_error-eaea847c": [
        ("https://github.com/huggingface/transformers/pull/34174",
         "transformers#34174 BLIP: enable generation tests (the BLIP models keep their own generate, which calls "
         "language_model.generate and bypasses the top-level forward)"),
    ],
    "data_dependent_guard-320b65b2": [
        ("https://github.com/huggingface/transformers/pull/42822",
         "transformers#42822 Rewrite for loop in get_image_features with torch ops for export (Llava and "
         "Mistral3's image-size bookkeeping; LlavaNext's select_best_resolution is the sibling left)"),
    ],
    "data_dependent_guard-89b65f3e": [
        ("https://github.com/huggingface/transformers/issues/38518",
         "transformers#38518 Failed to export Mixtral due to #32429 (the nonzero() expert-hit loop, "
         "data-dependent under export: Step3p7Experts has the same loop)"),
        ("https://github.com/huggingface/transformers/pull/40114",
         "transformers#40114 Fix torch.export compatibility for Mixtral MoE models (a static loop over experts)"),
        ("https://github.com/huggingface/transformers/pull/42697",
         "transformers#42697 batched and grouped experts implementations (the exportable experts interface "
         "Step3p7 does not use yet)"),
    ],
    "exception-aa949283": [
        ("https://github.com/huggingface/transformers/pull/43882",
         "transformers#43882 [fix] Use last_hidden_state key from get_image_features for llama4 (an earlier "
         "output-type refactor that left Llama4's forward reading the wrong field; this one is image_outputs)"),
    ],
}


def upstream_links(group_id: str) -> list[tuple[str, str]]:
    return list(UPSTREAM.get(group_id, []))
