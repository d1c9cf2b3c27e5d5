"""Shrinker invariants: properties over discovered classes' default configs, rules on small trees, and the
parameter budget of every tiny model (counted on the meta device: no weights are allocated)."""

import functools

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance.cases.tiny import (
    HEAD_KEYS,
    KV_HEAD_KEYS,
    LAYERS,
    MAX_PARAMETERS,
    VOCAB,
    _layer_refs,
    _scale_pinpoints,
    _scale_sections,
    set_dotted,
    shrink_tree,
    tiny_config,
)
from conformance.discover import discover


@functools.lru_cache(maxsize=None)
def _default_tree(name: str):
    info = next(i for i in discover() if i.name == name)
    try:
        return info.config_class().to_dict() if info.config_class else None
    except Exception:
        return None


NAMES = [i.name for i in discover() if i.config_class is not None]


def _nodes(tree):
    if isinstance(tree, dict):
        yield tree
        for value in tree.values():
            yield from _nodes(value)
    elif isinstance(tree, list):
        for item in tree:
            yield from _nodes(item)


def _int(node, keys):
    return next((node[k] for k in keys if isinstance(node.get(k), int) and not isinstance(node.get(k), bool)), None)


@settings(max_examples=40, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(NAMES))
def test_shrunk_config_keeps_invariants(name):
    tree = _default_tree(name)
    if tree is None:
        return
    tiny = shrink_tree(tree)
    for node in _nodes(tiny):
        heads, kv = _int(node, HEAD_KEYS), _int(node, KV_HEAD_KEYS)
        if heads and kv:
            assert heads % kv == 0, (name, heads, kv)
        for key in ("num_hidden_layers", "num_layers", "decoder_layers", "encoder_layers"):
            if isinstance(node.get(key), int):
                assert node[key] <= LAYERS, (name, key)
        if isinstance(node.get("vocab_size"), int):
            assert node["vocab_size"] <= VOCAB
        if isinstance(node.get("per_layer_config"), dict):
            assert all(int(k) < LAYERS for k in node["per_layer_config"]), name
        rope = node.get("rope_parameters")
        if isinstance(rope, dict) and isinstance(rope.get("mrope_section"), list):
            head_dim = node.get("qk_rope_head_dim") or node.get("head_dim")
            factor = rope.get("partial_rotary_factor", node.get("partial_rotary_factor", 1.0)) or 1.0
            if isinstance(head_dim, int) and "qk_rope_head_dim" not in node:
                assert sum(rope["mrope_section"]) == int(head_dim * factor) // 2, name
            elif isinstance(head_dim, int):
                assert sum(rope["mrope_section"]) == head_dim // 2, name


@given(st.lists(st.integers(1, 64), min_size=1, max_size=4), st.integers(4, 64))
def test_scaled_sections_sum_to_target(sections, target):
    scaled = _scale_sections(sections, target)
    assert sum(scaled) == target and len(scaled) == len(sections)


def test_pinpoints_become_multiples_of_the_tiny_tile():
    assert _scale_pinpoints([[336, 672], [672, 336], [672, 672], [1008, 336]]) == [[32, 64], [64, 32], [64, 64], [96, 32]]


def test_unset_placeholder_id_gets_a_free_id():
    tree = {"image_token_index": None, "text_config": {"vocab_size": 50000, "pad_token_id": 49999}}
    out = shrink_tree(tree)
    assert isinstance(out["image_token_index"], int) and out["image_token_index"] != out["text_config"]["pad_token_id"]
    assert 0 <= out["image_token_index"] < VOCAB


def test_per_layer_config_is_rekeyed_into_range():
    tree = {"num_hidden_layers": 30, "num_attention_heads": 8, "hidden_size": 512,
            "per_layer_config": {"05": {"head_dim": 512}, "11": {"head_dim": 512}}}
    out = shrink_tree(tree)
    assert list(out["per_layer_config"]) == ["01"]


def test_feature_layer_refs_stay_distinct_and_in_range():
    assert _layer_refs([24, 18]) == [1, 0]
    assert _layer_refs([-1, -2]) == [-1, -2]
    assert _layer_refs([0]) == [0]
    out = shrink_tree({"vision_config": {"num_hidden_layers": 25}, "vision_feature_layer": [24, 18]})
    assert out["vision_feature_layer"] == [1, 0]


def test_nope_mla_rope_part_stays_zero():
    tree = {"hidden_size": 4096, "num_attention_heads": 64, "num_key_value_heads": 64, "num_hidden_layers": 4,
            "qk_rope_head_dim": 0, "qk_nope_head_dim": 256, "v_head_dim": 256, "kv_lora_rank": 512, "q_lora_rank": 1536}
    out = shrink_tree(tree)
    assert out["qk_rope_head_dim"] == 0 and out["qk_nope_head_dim"] > 0


def test_rope_keyed_by_layer_type_gets_sections_per_type():
    tree = {"hidden_size": 512, "num_attention_heads": 8, "num_hidden_layers": 4, "head_dim": 64,
            "layer_types": ["sliding_attention", "full_attention"] * 2,
            "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 1e4, "mrope_section": [16, 8, 8]},
                                "full_attention": {"rope_type": "default", "rope_theta": 1e6, "mrope_section": [16, 8, 8]}}}
    out = shrink_tree(tree)
    for rope in out["rope_parameters"].values():
        assert sum(rope["mrope_section"]) == out["head_dim"] // 2
    assert tree["rope_parameters"]["full_attention"]["mrope_section"] == [16, 8, 8]  # input left untouched


def test_vq_conv_stack_is_one_width_and_keeps_its_stages():
    tree = {"vq_config": {"embed_dim": 256, "latent_channels": 256, "base_channels": 128,
                          "channel_multiplier": [1, 1, 2, 2, 4], "num_res_blocks": 2, "num_embeddings": 8192}}
    vq = shrink_tree(tree)["vq_config"]
    assert vq["channel_multiplier"] == [1] * 5 and vq["num_res_blocks"] == 1
    assert vq["base_channels"] == vq["embed_dim"] == vq["latent_channels"] and vq["base_channels"] % 32 == 0
    assert vq["num_embeddings"] <= 64


def test_stage_lists_and_conv_channels_agree():
    tree = {"vision_config": {"embed_dim": [128, 256, 512, 1024], "num_heads": [4, 8, 16, 32], "depths": [1, 1, 9, 1],
                              "hidden_size": 768, "output_channels": 256, "post_conv_in_channels": 256,
                              "post_conv_out_channels": 1024, "downsample_channels": [512, 1024], "in_channels": 3}}
    v = shrink_tree(tree)["vision_config"]
    assert v["embed_dim"] == [64] * 4 and all(h <= 4 for h in v["num_heads"]) and max(v["depths"]) <= LAYERS
    assert v["output_channels"] == v["post_conv_in_channels"] and v["in_channels"] == 3
    assert v["downsample_channels"][-1] == v["hidden_size"]


def test_merged_patch_width_stays_a_multiple_of_the_width():
    tree = {"vision_config": {"hidden_size": 1536, "merge_size": 2}, "text_config": {"hidden_size": 8192},
            "out_hidden_size": 6144, "projector_hidden_size": 4096}
    out = shrink_tree(tree)
    assert out["out_hidden_size"] == 4 * out["vision_config"]["hidden_size"]
    assert out["projector_hidden_size"] == out["text_config"]["hidden_size"]


def test_prefixed_submodel_sizes_shrink():
    out = shrink_tree({"hidden_size": 1024, "t2u_encoder_layers": 6, "t2u_encoder_ffn_dim": 8192,
                       "t2u_encoder_attention_heads": 16, "upsample_initial_channel": 512})
    assert out["t2u_encoder_layers"] <= LAYERS and out["t2u_encoder_ffn_dim"] <= 128
    assert out["t2u_encoder_attention_heads"] <= 4 and out["upsample_initial_channel"] <= 64


def test_prefixed_kv_heads_divide_their_own_heads():
    out = shrink_tree({"hidden_size": 6144, "num_attention_heads": 64, "num_key_value_heads": 8,
                       "swa_num_attention_heads": 64, "swa_num_key_value_heads": 16})
    assert out["swa_num_attention_heads"] % out["swa_num_key_value_heads"] == 0
    assert out["num_attention_heads"] % out["num_key_value_heads"] == 0


def test_fixture_fills_a_table_the_defaults_leave_unset():
    tree = {"vocabulary_map": None, "text_config": {}}
    set_dotted(tree, "vocabulary_map.<image>", 200)
    assert tree["vocabulary_map"] == {"<image>": 200}
    with pytest.raises(KeyError):
        set_dotted(tree, "no_such_table.key", 1)


def _meta_model(info):
    """The class's tiny model on the meta device (exact parameter count, no memory, no init cost)."""
    tiny = tiny_config(info)
    with torch.device("meta"):
        return info.model_class(tiny.config)


@pytest.mark.parametrize("name", NAMES)
def test_tiny_model_is_small(name):
    info = next(i for i in discover() if i.name == name)
    try:
        model = _meta_model(info)
    except Exception as exc:  # the build check reports classes whose tiny model cannot be built
        pytest.skip(f"tiny model does not build here: {type(exc).__name__}: {str(exc)[:120]}")
    parameters = sum(p.numel() for p in model.parameters())
    assert parameters <= MAX_PARAMETERS, f"{name}: {parameters:,} parameters > {MAX_PARAMETERS:,}"
