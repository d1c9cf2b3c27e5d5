"""How the cases stage meets what differs between supported transformers versions, by feature, on synthetic
inputs (these hold on every version): 4.x rope dicts, renamed config keys, 4.x encoder tuples and wrappers, a
video model with an empty image stub."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from conformance.cases.strategies._media import count_placeholders, encoder_features, feature_rows
from conformance.cases.strategies.query_tokens import is_video_model
from conformance.cases.tiny import HEAD_DIM, installed_key_path, shrink_tree


def test_a_4x_config_that_takes_mrope_sections_but_leaves_rope_scaling_unset_gets_them():
    out = shrink_tree({"model_type": "qwen2_vl_text", "hidden_size": 1024, "num_attention_heads": 16,
                       "rope_scaling": None})
    assert out["rope_scaling"]["rope_type"] == "default"
    assert sum(out["rope_scaling"]["mrope_section"]) == HEAD_DIM // 2
    plain = shrink_tree({"model_type": "llama", "hidden_size": 1024, "num_attention_heads": 16, "rope_scaling": None})
    assert plain["rope_scaling"] is None  # no sections declared: a None rope dict stays None


def test_a_4x_rope_scaling_with_sections_is_fitted_like_rope_parameters():
    out = shrink_tree({"model_type": "qwen2_5_omni_text", "hidden_size": 1024, "num_attention_heads": 16,
                       "rope_scaling": {"rope_type": "default", "mrope_section": [16, 24, 24]}})
    assert out["rope_scaling"]["mrope_section"] == [2, 3, 3]


def test_a_fixture_key_renamed_between_versions_lands_under_the_installed_name():
    five = {"text_config": {"rope_parameters": {"rope_type": "default"}}, "vision_feature_layer": [-2]}
    four = {"text_config": {"rope_scaling": None}, "vision_feature_layers": [-2]}
    assert installed_key_path(five, "text_config.rope_scaling.rope_type") == "text_config.rope_parameters.rope_type"
    assert installed_key_path(four, "text_config.rope_scaling.rope_type") == "text_config.rope_scaling.rope_type"
    assert installed_key_path(four, "vision_feature_layer") == "vision_feature_layers"
    assert installed_key_path(five, "text_config.no_such_key") == "text_config.no_such_key"  # a typo stays a typo


def test_a_4x_encoder_tuple_of_features_and_extras_counts_the_features_only():
    features, extras = torch.ones(2, 16, 8), torch.ones(5, 8)
    assert feature_rows(encoder_features((features, extras))) == 32  # Ovis2 4.x: (features, visual indicator)
    per_image = (torch.ones(4, 8), torch.ones(4, 8))
    assert feature_rows(encoder_features((per_image, [torch.ones(4, 8)]))) == 8  # Qwen3-VL 4.x: (split, deepstack)
    assert feature_rows(encoder_features(per_image)) == 8  # one tensor per image: all of them
    assert encoder_features(features) is features


class _Base:
    def get_image_features(self, pixel_values):
        return pixel_values.flatten(1, -2)  # one vector per patch row


class _Wrapper:
    """4.57's GotOcr2 shape: the top-level method hands its base model an argument that one does not take."""

    model = _Base()

    def get_image_features(self, pixel_values):
        return self.model.get_image_features(pixel_values, vision_feature_layer=-1)


def test_a_wrapper_that_passes_its_base_model_a_foreign_argument_counts_through_the_base_model():
    ctx = SimpleNamespace(model=_Wrapper())
    assert count_placeholders(ctx, {"pixel_values": torch.ones(2, 3, 4, 8)}, images=2) == 12


class _VideoModel:
    def get_image_features(self, pixel_values):  # 4.57's InstructBLIP-Video: an empty stub
        pass

    def get_video_features(self, pixel_values):
        return pixel_values


def _ctx(**config):
    return SimpleNamespace(model=_VideoModel(), config=SimpleNamespace(to_dict=lambda: config))


def test_a_model_with_a_video_placeholder_and_no_image_one_takes_frames_despite_an_image_stub():
    assert is_video_model(_ctx(video_token_index=5))
    assert not is_video_model(_ctx(video_token_index=5, image_token_index=4))
