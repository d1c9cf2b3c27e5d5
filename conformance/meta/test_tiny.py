"""Shrinker invariants, as properties over discovered classes' default configs (no model built)."""

import functools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance.discover import discover
from conformance.tiny import HEAD_KEYS, KV_HEAD_KEYS, LAYERS, VOCAB, _scale_pinpoints, _scale_sections, shrink_tree


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
