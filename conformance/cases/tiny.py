"""Stage 2a, build: shrink a class's default config to a tiny one and build it.

Contract of `tiny_config(info)`: start from ``config_class()`` (the library's
own defaults; for a checkpoint profile's row, `profile_tree`: each sub-config
the profile names replaced by its model type's defaults, then the checkpoint's
fields of ``[profile.config]`` set), shrink it generically with `shrink_tree`, then apply the data
in ``fixtures/models/<model_type>.toml`` (section ``[config]``, dotted keys; a
key transformers renamed between supported versions, `fixtures/versions.toml`
[renamed_config_keys], is applied under the installed version's name).
The result keeps the invariants models rely on:

* every width (hidden size, d_model, embed dim, and any size equal to one of
  the original widths, e.g. a projector's input) becomes one value `WIDTH`,
  so widths shared across sub-configs stay equal;
* heads divide the width, kv heads divide heads (MQA stays MQA), head_dim is
  width / heads;
* layer counts become `LAYERS`; per-layer lists are cut to that length
  keeping every distinct layer type; layer indices (index lists,
  `per_layer_config` keys) are remapped into range;
* rope sections (``mrope_section``) keep their ratios and sum to head_dim/2
  (on 4.x the rope dict is ``rope_scaling``; a config that takes sections but
  leaves it None gets default rope with explicit sections);
* MoE expert counts and top-k shrink together (top-k <= experts);
* special-token ids are remapped into the small vocabulary, distinct ids stay
  distinct; an image/video placeholder id left None by the defaults gets a free id;
* random-init std is at least `MIN_INIT_STD`, so every input path moves the logits;
* images are `IMAGE_SIZE` px and the patch size divides them; any-resolution
  grid pinpoints are the same multiples of `IMAGE_SIZE` (at most 3 tiles a side);
* hierarchical and conv encoders keep their stage count: per-stage width lists,
  conv channels wider than `WIDTH` and VQ base channels (multipliers 1) become
  `WIDTH`, per-stage heads/depths shrink; a merged-patch width (m*m x a width)
  stays m*m x `WIDTH`; VQ codebooks have `CODEBOOK_ENTRIES` entries;
* sub-model-prefixed sizes (``t2u_encoder_layers``, ``swa_num_key_value_heads``)
  follow the same rules as their plain names; zero MLA rope parts stay zero;
  rope dicts keyed by layer type are fitted per type;
* every tiny model has at most `MAX_PARAMETERS` parameters (a meta test).

`new_model(tiny, seed)` builds a fresh model with deterministic random
weights (no weight tensor left all zero): the same seed gives bit-identical weights, so a check can build one
instance to compile and another for the eager reference.
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass
from typing import Any

import torch

from conformance.cases.model_data import model_fixture
from conformance.discover import ModelInfo

WIDTH = 64
INTERMEDIATE = 128
LAYERS = 2
HEADS = 4
HEAD_DIM = WIDTH // HEADS
VOCAB = 256
IMAGE_SIZE = 32
PATCH = 8
EXPERTS = 4
TOP_K = 2
MAX_PARAMETERS = 5_000_000
MIN_INIT_STD = 0.02

WIDTH_KEYS = {
    "hidden_size", "d_model", "embed_dim", "n_embd", "dim", "width", "hidden_dim",
    "word_embed_proj_dim", "projection_dim", "d_embed", "model_dim", "emb_dim",
}
INTERMEDIATE_KEYS = {
    "intermediate_size", "ffn_dim", "d_ff", "encoder_ffn_dim", "decoder_ffn_dim", "mlp_dim",
    "moe_intermediate_size", "shared_expert_intermediate_size", "intermediate_size_mlp",
    "ffn_hidden_size", "dim_feedforward", "expert_intermediate_size", "dense_intermediate_size",
    "ff_dim", "inner_dim",
}
LAYER_KEYS = {
    "num_hidden_layers", "num_layers", "n_layer", "n_layers", "encoder_layers", "decoder_layers",
    "depth", "num_decoder_layers", "num_encoder_layers", "vision_layers", "text_layers", "layers",
}
HEAD_KEYS = {"num_attention_heads", "num_heads", "n_head", "n_heads", "encoder_attention_heads",
             "decoder_attention_heads", "attention_heads"}
KV_HEAD_KEYS = {"num_key_value_heads", "num_kv_heads", "n_kv_heads", "multi_query_group_num",
                "encoder_num_key_value_heads", "decoder_num_key_value_heads"}
EXPERT_KEYS = {"num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts", "n_experts"}
TOP_K_KEYS = {"num_experts_per_tok", "moe_topk", "moe_k", "num_experts_per_token", "top_k",
              "num_selected_experts"}
ONE_KEYS = {"n_shared_experts", "num_shared_experts", "n_group", "topk_group", "first_k_dense_replace",
            "decoder_sparse_step", "num_res_blocks"}
# Conv stacks: a base channel count scaled per stage by a multiplier list. Every
# stage becomes `WIDTH` wide (a multiple of 32: many VQ encoders hard-code
# GroupNorm(32 groups); some size their attention blocks by the model width).
BASE_CHANNEL_KEYS = {"base_channels"}
MULTIPLIER_LIST_KEYS = {"channel_multiplier", "channel_mult", "ch_mult"}
# HiFi-GAN/BigVGAN vocoders: the first upsampling conv's width, halved at every upsampling.
VOCODER_CHANNEL_KEYS = {"upsample_initial_channel"}
# VQ image tokenizers: codebook entries (image token ids are codebook indices).
CODEBOOK_ENTRY_KEYS = {"num_embeddings"}
CODEBOOK_ENTRIES = 64
# Audio conv encoders start from `num_filters` and double them per down-sampling ratio.
FILTERS = 4
MLA_KEYS = {"qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": HEAD_DIM,
            "kv_lora_rank": 32, "q_lora_rank": 32}
VOCAB_KEYS = {"vocab_size", "text_vocab_size", "unpadded_vocab_size"}
# Per-stage lists of hierarchical encoders (DaViT, SAM necks, conv stages): every stage
# `WIDTH` wide, at most `HEADS` heads/groups and `LAYERS` blocks.
STAGE_WIDTH_LISTS = re.compile(r"^(hidden_sizes|embed_dims?|dims|widths|hidden_dims|\w*_channels)$")
STAGE_HEAD_LISTS = HEAD_KEYS | {"num_groups"}
STAGE_DEPTH_LISTS = {"depths", "depth"}
# Conv channel counts wider than `WIDTH` (necks, projections, post-convs); input/RGB
# channels are never that wide, and all such convs then agree on one width.
CHANNEL_WIDTH = re.compile(r"^(?!num_).*channels$")
# Sizes that look like widths by name but never are.
NOT_A_WIDTH = re.compile(
    r"position|vocab|image_size|patch|window|length|num_|token|_id|rate|mel|chunk|frame|bin|stride|"
    r"kernel|max_|seq|bucket|codebook|grid|pinpoint|resolution|crop|shortest|longest|pixels|layers"
)
# Any large size named like a width is one (projector/out widths not equal to a model width).
WIDE_KEY = re.compile(r"hidden_size|hidden_dim|embed_dim|d_model|_width$|proj_dim|projection_dim|out_dim|"
                      r"_(input|output)_dim$|^projector_\w*dim$")
# Patch-merge factors: m x m patches become one token of m*m times the width.
MERGE_KEYS = {"merge_size", "spatial_merge_size"}
SHUFFLE_RATIO_KEYS = {"pixel_shuffle_ratio"}
LARGE_WIDTH = 256
TOKEN_ID = re.compile(r"(_token_id|_token_index|_token_ids|_id)$|^(bos|eos|pad|sep|cls|unk|mask)_")
UNSET_PLACEHOLDER_KEYS = ("image_token_index", "image_token_id", "video_token_index", "video_token_id")
LAYER_INDEX_LIST = re.compile(r"(indexes|indices|layer_ids|_block_indexes|fullatt_block_indexes|deepstack_visual_indexes)$")


@dataclass
class TinyModel:
    """A tiny config for one class, and how it was obtained."""

    info: ModelInfo
    config: Any
    source: str  # "auto" or "auto+fixture"
    parameters: int = 0


def _collect(tree: Any, keys: set[str], found: set[int]) -> None:
    if isinstance(tree, dict):
        for key, value in tree.items():
            if key in keys and isinstance(value, int) and not isinstance(value, bool) and value > 0:
                found.add(value)
            _collect(value, keys, found)
    elif isinstance(tree, list):
        for item in tree:
            _collect(item, keys, found)


def _collect_ids(tree: Any, found: set[int]) -> None:
    if isinstance(tree, dict):
        for key, value in tree.items():
            if isinstance(key, str) and TOKEN_ID.search(key) and "layer" not in key:
                if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                    found.add(value)
                elif isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
                    found.update(v for v in value if v >= 0)
            _collect_ids(value, found)
    elif isinstance(tree, list):
        for item in tree:
            _collect_ids(item, found)


def _scale_sections(sections: list[int], target: int) -> list[int]:
    """Keep the ratios of rope sections and make them sum to `target`."""
    total = sum(sections) or 1
    scaled = [max(1, s * target // total) for s in sections]
    scaled[-1] += target - sum(scaled)
    if scaled[-1] < 1:
        return [target // len(sections)] * (len(sections) - 1) + [target - target // len(sections) * (len(sections) - 1)]
    return scaled


def _scale_pinpoints(pinpoints: list[list[int]], most: int = 3) -> list[list[int]]:
    """Any-resolution grid pinpoints (multiples of the tile size) as multiples of `IMAGE_SIZE`."""
    base = math.gcd(*[v for p in pinpoints for v in p]) or 1
    scaled = [[min(v // base, most) * IMAGE_SIZE for v in p] for p in pinpoints]
    return [list(p) for p in dict.fromkeys(tuple(p) for p in scaled)]


def _cut_layer_list(values: list, n: int) -> list:
    """First `n` entries, but every distinct value of the original kept."""
    distinct = list(dict.fromkeys(v for v in values if isinstance(v, (str, int, bool, type(None)))))
    if len(distinct) <= 1:
        return values[:n]
    picked = distinct[:n]
    return picked + [picked[-1]] * (n - len(picked))


def _prefixed(key: str, keys: set[str]) -> bool:
    """`key` is one of `keys` with a sub-model prefix (``t2u_encoder_layers``, ``speech_encoder_attention_heads``)."""
    return any(key.endswith("_" + k) for k in keys)


def _shrink_stage_list(key: str, value: list) -> list:
    """Per-stage widths, heads and depths of a hierarchical encoder, made tiny (same stage count)."""
    if not value or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return value
    if STAGE_WIDTH_LISTS.search(key) and key != "num_channels":
        return [WIDTH if v > WIDTH else v for v in value]
    if key in STAGE_HEAD_LISTS:
        return [min(v, HEADS) for v in value]
    if key in STAGE_DEPTH_LISTS:
        return [min(v, LAYERS) for v in value]
    return value


def _shuffle_factors(tree: Any) -> set[int]:
    """Merge factors 1/r of pixel-shuffle ratios r (0.5 -> 2) anywhere in `tree`."""
    found: set[int] = set()
    if isinstance(tree, dict):
        for key, value in tree.items():
            if key in SHUFFLE_RATIO_KEYS and isinstance(value, float) and 0 < value < 1 and (1 / value).is_integer():
                found.add(int(1 / value))
            found |= _shuffle_factors(value)
    elif isinstance(tree, list):
        for item in tree:
            found |= _shuffle_factors(item)
    return found


def _layer_refs(refs: list[int]) -> list[int]:
    """Feature-layer references into a `LAYERS`-deep encoder, distinct ones kept distinct.

    Negative refs count from the end (-1 the last); positive ones are ranked
    from the deepest down to index `LAYERS - 1`, so they index a layer whether
    the model counts layers or hidden states (embeddings + layers).
    """
    positive = sorted({v for v in refs if v >= 0}, reverse=True)
    rank = {v: min(v, max(0, LAYERS - 1 - i)) for i, v in enumerate(positive)}
    return [max(v, -(LAYERS + 1)) if v < 0 else rank[v] for v in refs]


class _Shrinker:
    def __init__(self, tree: dict) -> None:
        self.widths: set[int] = set()
        self.intermediates: set[int] = set()
        _collect(tree, WIDTH_KEYS, self.widths)
        _collect(tree, INTERMEDIATE_KEYS, self.intermediates)
        merges: set[int] = set()
        _collect(tree, MERGE_KEYS, merges)
        merges.update(_shuffle_factors(tree))
        # a width that is m*m times a model width is a merged-patch width: it stays m*m times WIDTH
        self.merged = {w * m * m: m for w in self.widths for m in merges if m > 1}
        ids: set[int] = set()
        _collect_ids(tree, ids)
        # Large special ids go to the top of the small vocabulary, in order;
        # small ones (0, 1, 2: pad/bos/eos) keep their value.
        self.id_map = {}
        top = VOCAB - 1
        for old in sorted(ids, reverse=True):
            if old < 16:
                self.id_map[old] = old
            else:
                self.id_map[old] = top
                top -= 1
        self.next_free_id = top

    def shrink(self, node: dict) -> dict:
        old_layers = next((node[k] for k in LAYER_KEYS if isinstance(node.get(k), int)), None)
        old_heads = next((node[k] for k in HEAD_KEYS if isinstance(node.get(k), int)), None)
        out = {}
        for key, value in node.items():
            out[key] = self._value(key, value, node, old_layers, old_heads)
        _fix_head_dims(node, out)
        _fix_mrope(out)
        return out

    def _value(self, key: str, value: Any, node: dict, old_layers: int | None, old_heads: int | None) -> Any:
        if not isinstance(key, str):  # an int-keyed table (per-layer or per-id): shrink inside, keep keys
            return self.shrink(value) if isinstance(value, dict) else value
        if isinstance(value, dict):
            if key in ("rope_parameters", "rope_scaling"):
                return self._rope(value)
            if key in ("id2label", "label2id"):
                return value
            if key == "per_layer_config" and old_layers:
                return self._per_layer(value, old_layers)
            return self.shrink(value)
        if isinstance(value, list):
            value = _shrink_stage_list(key, value)
            if old_layers and len(value) == old_layers and key not in ("mrope_section",) and not LAYER_INDEX_LIST.search(key):
                return _cut_layer_list(value, LAYERS)
            if LAYER_INDEX_LIST.search(key) and old_layers and all(isinstance(v, int) for v in value):
                return sorted({min(LAYERS - 1, v * LAYERS // old_layers) for v in value})
            if key in MULTIPLIER_LIST_KEYS and all(isinstance(v, int) for v in value):
                return [1] * len(value)  # same stage count (same down-sampling), one width
            if key in INTERMEDIATE_KEYS and all(isinstance(v, int) for v in value):
                return [INTERMEDIATE] * len(value)
            if key in ("vision_feature_layer", "vision_feature_layers") and all(isinstance(v, int) for v in value):
                # (4.x names the list `vision_feature_layers`)
                return _layer_refs(value)
            if TOKEN_ID.search(key) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
                return [self.id_map.get(v, v) for v in value]
            if key == "image_grid_pinpoints" and all(isinstance(v, list) for v in value):
                return _scale_pinpoints(value)
            if key == "mrope_section":
                return _scale_sections(value, HEAD_DIM // 2)
            return [self.shrink(v) if isinstance(v, dict) else v for v in value]
        if isinstance(key, str) and key.endswith("initializer_range") and isinstance(value, float) and value < MIN_INIT_STD:
            return MIN_INIT_STD  # near-zero random weights make an input path invisible in the logits
        if not isinstance(value, int) or isinstance(value, bool):
            return value
        return self._int(key, value, node, old_heads)

    def _per_layer(self, table: dict, old_layers: int) -> dict:
        """Per-layer overrides keyed by layer index, re-keyed into the tiny layer range.

        Every distinct (shrunk) override is kept while layers last; a model that
        had plain layers keeps layer 0 plain.
        """
        distinct: list[dict] = []
        for key in sorted(table, key=lambda k: int(k)):
            shrunk = self.shrink(table[key]) if isinstance(table[key], dict) else table[key]
            if shrunk not in distinct:
                distinct.append(shrunk)
        first = 1 if len(table) < old_layers else 0
        width = max(len(str(k)) for k in table) if table else 1
        out = {}
        for index, override in zip(range(first, LAYERS), distinct):
            out[str(index).zfill(width) if isinstance(next(iter(table)), str) else index] = override
        return out

    def _layer_ref(self, v: int) -> int:
        return _layer_refs([v])[0]

    def _int(self, key: str, value: int, node: dict, old_heads: int | None) -> int:
        if key in VOCAB_KEYS:
            return VOCAB if value > VOCAB else value
        if TOKEN_ID.search(key) and "layer" not in key:
            return self.id_map.get(value, value) if value >= 0 else value
        if key in LAYER_KEYS or _prefixed(key, LAYER_KEYS):
            return min(value, LAYERS)
        if key == "vision_feature_layer":
            return self._layer_ref(value)
        if key in HEAD_KEYS or (_prefixed(key, HEAD_KEYS) and not _prefixed(key, KV_HEAD_KEYS)):
            return min(value, HEADS)
        if key in KV_HEAD_KEYS or _prefixed(key, KV_HEAD_KEYS):
            prefix = next((key[: -len(k)] for k in KV_HEAD_KEYS if key.endswith(k)), "")
            if prefix:  # a sub-model's kv heads go with that sub-model's heads (swa_num_key_value_heads)
                old_heads = next((node[prefix + k] for k in HEAD_KEYS if isinstance(node.get(prefix + k), int)), None)
            if old_heads and value >= old_heads:
                return HEADS
            return 1 if value == 1 else min(value, HEADS // 2)
        if key in MLA_KEYS:
            return MLA_KEYS[key] if value else 0  # a zero part (NoPE heads) stays zero
        if key.endswith("head_dim"):
            return HEAD_DIM
        if key in EXPERT_KEYS:
            return min(value, EXPERTS)
        if key in TOP_K_KEYS:
            return min(value, TOP_K)
        if key in ONE_KEYS:
            return min(value, 1)
        if key in CODEBOOK_ENTRY_KEYS:
            return min(value, CODEBOOK_ENTRIES)
        if key in BASE_CHANNEL_KEYS:
            return WIDTH
        if CHANNEL_WIDTH.search(key) and value > WIDTH:
            return WIDTH
        if key == "num_filters":
            return min(value, FILTERS)
        if key in VOCODER_CHANNEL_KEYS:
            return min(value, WIDTH)
        if key in INTERMEDIATE_KEYS or _prefixed(key, INTERMEDIATE_KEYS) or key.endswith("intermediate_size") or (
                value in self.intermediates and "intermediate" in key):
            return INTERMEDIATE
        if key == "image_size":
            return IMAGE_SIZE
        if key == "patch_size":
            return PATCH if value > PATCH else value
        if key.endswith("_dim") and value in {node.get(k) for k in WIDTH_KEYS if isinstance(node.get(k), int)}:
            return WIDTH  # a dim its own config ties to its width (a quantizer without projections)
        if key not in WIDTH_KEYS and value in self.merged and value not in self.widths and not NOT_A_WIDTH.search(key) and (
                WIDE_KEY.search(key) or re.search(r"hidden|dim", key)):
            return WIDTH * self.merged[value] ** 2
        if key in WIDTH_KEYS or (value in self.widths and not NOT_A_WIDTH.search(key)
                                 and re.search(r"hidden|dim|embed|size|d_model|width|channels", key)):
            return WIDTH
        if value >= LARGE_WIDTH and WIDE_KEY.search(key) and not NOT_A_WIDTH.search(key):
            # a projector or output width the defaults left unequal to any model width
            return WIDTH
        return value

    def _rope(self, rope: dict) -> dict:
        return copy.deepcopy(rope)  # mrope sections are fitted by `_fix_mrope` once head dims are known


def _fix_head_dims(old: dict, out: dict) -> None:
    """Head dims of one attention config stay consistent with each other.

    `head_dim` is explicit (a None default leaves models to guess); a
    `head_dim` equal to the rope part of an MLA head stays equal to it;
    `qk_head_dim` stays the sum of its nope and rope parts.
    """
    if "head_dim" not in out or not any(k in out for k in HEAD_KEYS):
        return
    if isinstance(old.get("head_dim"), int) and old.get("head_dim") == old.get("qk_rope_head_dim"):
        out["head_dim"] = out["qk_rope_head_dim"]
    else:
        out["head_dim"] = HEAD_DIM
    if isinstance(out.get("qk_nope_head_dim"), int) and isinstance(out.get("qk_rope_head_dim"), int):
        if "qk_head_dim" in out:
            out["qk_head_dim"] = out["qk_nope_head_dim"] + out["qk_rope_head_dim"]


def _declares_mrope(node: dict) -> bool:
    """Whether `node`'s config class takes multimodal rope sections (`mrope_section`).

    transformers 5 declares them in ``ignore_keys_at_rope_validation``; 4.x
    config classes name them only where their ``__init__`` validates the rope
    dict (``rope_config_validation(self, ignore_keys={"mrope_section"})``).
    """
    import inspect

    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    model_type = node.get("model_type")
    try:
        cls = CONFIG_MAPPING[model_type]
    except Exception:
        cls = _unmapped_config_class(model_type)
    if cls is None:
        return False
    if hasattr(cls, "ignore_keys_at_rope_validation"):
        return "mrope_section" in (cls.ignore_keys_at_rope_validation or ())
    try:
        return '"mrope_section"' in inspect.getsource(cls.__init__)
    except (OSError, TypeError):
        return False


def _unmapped_config_class(model_type: Any):
    """The imported config class of a `model_type` the auto mapping lacks (4.57's GLM-4V-MoE text config
    calls itself ``Glm4vMoe_text``), or None."""
    from transformers import PretrainedConfig

    if not isinstance(model_type, str) or not model_type:
        return None
    todo, seen = list(PretrainedConfig.__subclasses__()), set()
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        if cls.__dict__.get("model_type") == model_type:
            return cls
        todo.extend(cls.__subclasses__())
    return None


def _rope_by_layer_type(out: dict) -> dict[str, dict] | None:
    """The per-layer-type rope dicts of a config that keys `rope_parameters` by
    its `layer_types` (None for a flat rope dict). A declared-mrope config whose
    standardized default rope dict is empty keys it by layer type (a flat one
    would have been given a rope_type): each layer type gets a default rope."""
    rope, layer_types = out.get("rope_parameters"), out.get("layer_types")
    if not isinstance(rope, dict) or not isinstance(layer_types, list) or not layer_types:
        return None
    if rope and set(rope) <= set(layer_types) and all(isinstance(v, dict) or v is None for v in rope.values()):
        return {k: v for k, v in rope.items() if isinstance(v, dict)}
    if not rope and _declares_mrope(out):
        for layer_type in dict.fromkeys(layer_types):
            rope[layer_type] = {"rope_type": "default", "rope_theta": 10000.0}
        return rope
    return None


def _fix_mrope(out: dict) -> None:
    """`mrope_section` sums to half the rotary dim (head_dim x partial rotary factor,
    or the MLA rope part), keeping its ratios; configs that take sections but leave
    them to a code default get explicit ones (the common 2:3:3 t/h/w split).
    Rope dicts keyed by layer type are fixed one by one."""
    by_type = _rope_by_layer_type(out)
    if by_type is not None:
        for rope in by_type.values():
            _fix_mrope_dict(out, rope)
        return
    rope = out.get("rope_parameters")
    if isinstance(rope, dict):
        _fix_mrope_dict(out, rope)
    elif "rope_parameters" not in out and "rope_scaling" in out:
        _fix_legacy_mrope(out)


def _fix_legacy_mrope(out: dict) -> None:
    """transformers 4.x: the rope dict is ``rope_scaling``, and a config that takes
    mrope sections but leaves ``rope_scaling`` None (the 4.x default of Qwen2-VL,
    GLM-4V ...) builds no model (its attention indexes ``rope_scaling["mrope_section"]``):
    it gets default rope with explicit sections, as every checkpoint sets them."""
    rope = out["rope_scaling"]
    if rope is None:
        if not _declares_mrope(out):
            return
        rope = out["rope_scaling"] = {"rope_type": "default"}
    if isinstance(rope, dict):
        _fix_mrope_dict(out, rope)


def _fix_mrope_dict(out: dict, rope: dict) -> None:
    sections = rope.get("mrope_section")
    if not isinstance(sections, list):
        if not _declares_mrope(out):
            return
        sections = [2, 3, 3]
    factor = rope.get("partial_rotary_factor", out.get("partial_rotary_factor", 1.0)) or 1.0
    rotary = out.get("qk_rope_head_dim") or int((out.get("head_dim") or HEAD_DIM) * factor)
    if rotary // 2 < len(sections) and isinstance(out.get("head_dim"), int) and "qk_rope_head_dim" not in out:
        # too few rotary dims for one per section: widen the heads, not the sections
        out["head_dim"] = int(2 * len(sections) / factor)
        rotary = int(out["head_dim"] * factor)
    rope["mrope_section"] = _scale_sections(sections, rotary // 2)


def shrink_tree(tree: dict) -> dict:
    """The generic shrinking rules over a config's `to_dict()` tree.

    Audio-specific rules (mel bins, source positions, codebooks) live in
    `conformance.cases.shrink_audio` and run after the generic ones.
    """
    from conformance.cases.shrink_audio import shrink_audio

    shrinker = _Shrinker(tree)
    out = shrinker.shrink(tree)
    for key in UNSET_PLACEHOLDER_KEYS:
        # a placeholder id the defaults leave unset (checkpoints set it): a free id of the tiny vocab
        if key in out and out[key] is None:
            out[key] = shrinker.next_free_id
            shrinker.next_free_id -= 1
    return shrink_audio(out)


def set_dotted(tree: dict, dotted: str, value: Any) -> None:
    """Set `a.b.c` in a nested dict; every parent must already exist, as a
    table or as None (a table the defaults leave unset, e.g. a vocabulary map)."""
    node = tree
    parts = dotted.split(".")
    for part in parts[:-1]:
        if part in node and node[part] is None:
            node[part] = {}
        if not isinstance(node.get(part), dict):
            raise KeyError(dotted)
        node = node[part]
    node[parts[-1]] = value


def installed_key_path(tree: dict, dotted: str) -> str:
    """`dotted` with each key the tree lacks replaced by its other name, when transformers renamed it between
    supported versions and the tree has that one (`fixtures/versions.toml` [renamed_config_keys]: a fixture's
    ``text_config.rope_scaling.rope_type`` is ``text_config.rope_parameters.rope_type`` on 5.x)."""
    from conformance.versions import renamed_config_keys

    renamed = renamed_config_keys()
    node, parts = tree, []
    for part in dotted.split("."):
        if isinstance(node, dict) and part not in node and renamed.get(part) in node:
            part = renamed[part]
        parts.append(part)
        node = node.get(part) if isinstance(node, dict) else None
    return ".".join(parts)


def _fill_unset_subconfigs(info: ModelInfo, tree: dict) -> None:
    """A modality's sub-config the defaults leave None (vision_config for an image
    model, audio_config for an audio one) gets that sub-config class's defaults,
    so the tiny model has the encoder its modality needs."""
    for key, sub_class in (getattr(info.config_class, "sub_configs", None) or {}).items():
        wanted = (key.startswith("vision") and ("image" in info.modalities or "video" in info.modalities)) or (
            key.startswith("audio") and "audio" in info.modalities)
        if wanted and tree.get(key) is None and isinstance(sub_class, type) and hasattr(sub_class, "model_type"):
            try:
                tree[key] = sub_class().to_dict()
            except Exception:
                continue


def profile_tree(profile, tree: dict) -> dict:
    """The full-size config tree of a checkpoint profile (`conformance.profiles.Profile`) from the class's default
    `tree`: each of its `sub_configs` the defaults of that model type's config class, then its `config` fields and
    its `unset` ones (None, the checkpoint's null) (dotted keys, a renamed key under the installed version's name). A model type the installed transformers
    lacks, or a field whose parent table the tree lacks, raises ValueError naming the profile and the fix."""
    from transformers import CONFIG_MAPPING

    tree = copy.deepcopy(tree)
    where = f"fixtures/models/{profile.model_type}.toml [[profile]] {profile.name}"
    for key, model_type in profile.sub_configs.items():
        if model_type not in CONFIG_MAPPING:
            raise ValueError(f"{where}: sub_configs.{key} = {model_type!r} is no model type of the installed "
                             "transformers; write a config's model_type")
        tree[key] = CONFIG_MAPPING[model_type]().to_dict()
    for dotted, value in [*profile.config.items(), *((key, None) for key in profile.unset)]:
        try:
            set_dotted(tree, installed_key_path(tree, dotted), value)
        except KeyError:
            raise ValueError(f"{where}: config key {dotted!r} has no parent table in the config; "
                             "name an existing sub-config") from None
    return tree


def tiny_config(info: ModelInfo) -> TinyModel:
    """The tiny config of `info`'s class (see the module docstring)."""
    if info.config_class is None:
        raise RuntimeError(f"{info.name} declares no config_class")
    default = info.config_class()
    tree = default.to_dict()
    if info.profile is not None:
        tree = profile_tree(info.profile, tree)
    _fill_unset_subconfigs(info, tree)
    tree = shrink_tree(tree)
    fixture = model_fixture(info.model_type)
    source = "auto"
    if fixture and fixture.config:
        source = "auto+fixture"
        for dotted, value in fixture.config.items():
            set_dotted(tree, installed_key_path(tree, dotted), value)
    for key in ("transformers_version", "architectures", "_name_or_path"):
        tree.pop(key, None)
    config = info.config_class.from_dict(tree)
    return TinyModel(info=info, config=config, source=source)


def new_model(tiny: TinyModel, seed: int = 0, device: str | torch.device = "cpu",
              dtype: torch.dtype = torch.float32, config: Any = None) -> torch.nn.Module:
    """A fresh model in eval mode with deterministic random weights (from `config`, default the tiny config)."""
    torch.manual_seed(seed)
    model = tiny.info.model_class(tiny.config if config is None else config)
    _wake_zero_parameters(model)
    model = model.to(device=device, dtype=dtype).eval()
    tiny.parameters = sum(p.numel() for p in model.parameters())
    return model


def _wake_zero_parameters(model: torch.nn.Module) -> None:
    """Give all-zero weights (zero-init projections, tanh gates) small random values.

    Libraries zero-initialize some projections and gates so training starts
    from the text-only model; with random weights that hides a whole input
    path from the logits. Biases stay as initialized.
    """
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.is_floating_point() and not name.endswith("bias") and param.numel() and not param.any():
                param.normal_(0.0, MIN_INIT_STD)
