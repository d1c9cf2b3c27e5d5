"""Synthetic models for the dtype-true contracts (`test_dtype_contracts.py`): right in float32, and either right
or wrong in half precision.

`half_case(factory, dtype)` is a planted case (`planted.case_for`'s prompt and
tiny config) whose fresh models are `factory()` with the same weights, cast to
`dtype`, as a real case's are (`Case.fresh_model`); its inputs are cast by
`Case.inputs` as a real case's. The models:

* `planted.TinyLM` and `two_layer_llama()`: right in every dtype. The Llama's
  second layer reads the first layer's attention output, which sdpa over a
  static cache (more slots, another kernel length) rounds differently from
  sdpa over a dynamic one: in half precision its layer 1 keys differ by
  rounding (bfloat16: 0.00049), as Llava's and PaliGemma's do (issue 52),
  and must pass.
* `StaticRopeInDtypeLM`: rotates its keys by a position angle; the dynamic
  path computes the angle in float32 (as transformers' rotary embeddings do),
  the static-cache path in the model's dtype. Bit for bit the same model in
  float32; in bfloat16 and float16 the angle of position p is rounded to the
  dtype, so the static cache holds other keys.
* `Float32MinimumLM`: keeps the image placeholder out of its predictions with
  a bias made inside the forward in float32 (its minimum), cast to the
  logits' dtype: finite in float32, -inf in half precision.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from conformance.meta.planted import IMAGE_TOKEN, VOCAB, PlantedCase, TinyLM, case_for

ANGLE_PER_POSITION = 10.3  # radians; positions 13+ pass 128, where bfloat16 keeps whole radians only


@dataclass
class HalfCase(PlantedCase):
    """A planted case whose fresh models are cast to the case's dtype (see the module)."""

    def fresh_model(self) -> torch.nn.Module:
        return super().fresh_model().to(self.dtype)


def half_case(factory, dtype: torch.dtype, media: bool = False) -> HalfCase:
    """`factory`'s models in `dtype`, on the planted prompt (batch 2, the first row left-padded)."""
    base = case_for(TinyLM, media)
    return HalfCase(info=base.info, tiny=base.tiny, sample=base.sample, dtype=dtype, factory=factory)


def two_layer_llama() -> torch.nn.Module:
    """A stock two-layer LlamaForCausalLM (sdpa attention): right in every dtype."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                         pad_token_id=0, bos_token_id=1, eos_token_id=2)
    config._attn_implementation = "sdpa"
    return LlamaForCausalLM(config)


def _rotate(keys: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """Keys [batch, heads, length, dim] rotated pairwise by `angle` [length] (cos and sin in the keys' dtype)."""
    cos, sin = angle.cos().to(keys.dtype)[:, None], angle.sin().to(keys.dtype)[:, None]
    even, odd = keys[..., ::2], keys[..., 1::2]
    return torch.cat([even * cos - odd * sin, even * sin + odd * cos], dim=-1)


class StaticRopeInDtypeLM(TinyLM):
    """The static-cache path computes its key angles in the model's dtype, the dynamic path in float32."""

    def write(self, cache, keys, values, decode: bool):
        from transformers.cache_utils import StaticCache

        positions = cache.get_seq_length() + torch.arange(keys.shape[2], device=keys.device)
        if isinstance(cache, StaticCache):
            angle = positions.to(keys.dtype) * ANGLE_PER_POSITION  # the bug: rounded to the dtype
        else:
            angle = positions.to(torch.float32) * ANGLE_PER_POSITION
        return cache.update(_rotate(keys, angle), values, 0)


class Float32MinimumLM(TinyLM):
    """Suppresses the image placeholder with float32's minimum, cast to the logits' dtype (-inf in half)."""

    def adjust(self, logits, decode: bool, cache):
        bias = torch.zeros(VOCAB, device=logits.device)  # float32, whatever the model's dtype
        bias[IMAGE_TOKEN] = torch.finfo(torch.float32).min
        return logits + bias.to(logits.dtype)
