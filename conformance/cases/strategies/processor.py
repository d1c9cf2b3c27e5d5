"""Samples made by the model type's real processor, built locally (`conformance.cases.processors`).

The path users take: two prompts of different text, each with one image
marker, and two different images (seeded uint8 arrays) go through the
processor with ``padding=True`` and left padding; the sample is exactly the
processor's output tensors the forward accepts (less training ``labels``),
plus ``decoder_input_ids`` for an encoder-decoder (what `generate` starts
the decoder with; no processor makes them). Never auto-selected: a
fixture chooses it with ``[samples] strategy = "processor"`` (and may add a
``[samples.processor]`` table, see `conformance.cases.processors`).

Cross-check: the placeholders the processor wrote per image must equal what
the model's own encoder emits for the processor's pixels
(`count_placeholders`); if not, the sample is refused with a ValueError that
gives both numbers.

A processor that cannot be built here (`ProcessorUnavailable`: no processor
or image-processor class for the model type in the installed transformers,
an ``AutoImageProcessor`` that only a checkpoint resolves, a part that needs
torchvision...) gives way to the model-derived sample: the strategy
`auto_select` picks from the forward signature and config, exactly as for a
class without a fixture. The sample says so: its strategy is recorded as
``"<strategy> (processor unavailable)"`` and ``notes["processor_unavailable"]``
holds the reason, so the envelope shows which classes did not go through
their processor and why. Only a processor that cannot be *built* falls back:
one that is built but rejects the prompt, or whose placeholder count the
encoder disagrees with, is an error as before.
"""

from __future__ import annotations

import numpy as np
import torch

from conformance.cases.processors import ProcessorSpec, ProcessorUnavailable, build_processor, image_marker
from conformance.cases.samples import BATCH, TEXT_TOKENS, Sample
from conformance.cases.strategies import auto_select, get_strategy, register
from conformance.cases.strategies._media import count_placeholders, image_hw, image_token_id, images_per_prompt, scaled
from conformance.cases.strategies.text import decoder_inputs, is_encoder_decoder

TEXT_KEYS = ("input_ids", "attention_mask", "token_type_ids", "mm_token_type_ids")
TRAINING_KEYS = ("labels",)  # training targets some processors add (PaliGemma); a prefill sample has none


def sample_images(hw: tuple[int, int], seed: int = 0, count: int = BATCH) -> list[np.ndarray]:
    """`count` different RGB uint8 images of size `hw` (H, W, 3), from a seeded generator."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, size=(*hw, 3), dtype=np.uint8) for _ in range(count)]


def sample_prompts(marker: str, words: list[str]) -> list[str]:
    """`BATCH` prompts of different text around an image `marker` (or several, space-separated); the first is the
    shortest."""
    before, after = TEXT_TOKENS
    prompts, start = [], 0
    for i in range(BATCH):
        head = words[start:start + before + i]
        start += before + i
        tail = words[start:start + after + i]
        start += after + i
        prompts.append(" ".join(head) + f" {marker} " + " ".join(tail))
    return prompts


def ordinary_words(tokenizer, count: int) -> list[str]:
    """`count` distinct ordinary words of the local tokenizer (never a special token)."""
    special = set(tokenizer.all_special_tokens)
    words = [w for w, _ in sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
             if w.startswith("w") and w not in special]
    if len(words) < count:
        raise ValueError(f"the tiny vocabulary has {len(words)} ordinary words; the prompts need {count}")
    return words[:count]


def processor_inputs(ctx):
    """(processor, its outputs as tensors) for the sample's prompts and images.

    Tokens the processor adds to its tokenizer land past the tiny vocabulary;
    those its output uses are placed inside it and the processor is built again.
    """
    spec = ProcessorSpec.from_recipe(ctx.recipe)
    hw = image_hw(ctx)
    picture_hw = scaled(ctx, *(spec.image_size or hw))
    n = images_per_prompt(ctx)
    vocab = int(ctx.vocabulary_config.vocab_size)
    added: tuple[str, ...] = ()
    for _ in range(2):
        processor = build_processor(ctx.config, ctx.tiny.info.model_type, spec, hw, ctx.vocabulary_config, added)
        marker = image_marker(processor, spec)
        prompts = sample_prompts(" ".join([marker] * n),
                                 ordinary_words(processor.tokenizer, 2 * sum(TEXT_TOKENS) + 2 * BATCH))
        pictures = sample_images(picture_hw, count=BATCH * n)
        images = [pictures[i * n:(i + 1) * n] for i in range(BATCH)]
        out = processor(images=images, text=prompts, padding=True, padding_side="left", return_tensors="pt")
        outside = sorted({int(i) for i in out["input_ids"].flatten() if i >= vocab})
        if not outside:
            return processor, dict(out)
        if added:
            break
        added = tuple(processor.tokenizer.convert_ids_to_tokens(outside))
    raise ValueError(f"{type(processor).__name__} writes tokens {added} outside the tiny vocabulary of {vocab}")


FALLBACK_SUFFIX = " (processor unavailable)"


def model_derived_sample(ctx, why: ProcessorUnavailable) -> Sample:
    """The sample of the strategy the forward signature and config select, marked as a fallback."""
    sample = get_strategy(auto_select(ctx))(ctx)
    sample.strategy = f"{sample.strategy}{FALLBACK_SUFFIX}"
    sample.notes = {**sample.notes, "processor_unavailable": str(why)}
    return sample


@register("processor")
def processor_sample(ctx) -> Sample:
    try:
        processor, out = processor_inputs(ctx)
    except ProcessorUnavailable as exc:
        return model_derived_sample(ctx, exc)
    accepted = ctx.forward_params
    inputs = {k: v for k, v in out.items()
              if k in accepted and k not in TRAINING_KEYS and isinstance(v, torch.Tensor)}
    media = tuple(k for k, v in inputs.items() if v.is_floating_point())
    if not media:
        raise ValueError(f"{type(processor).__name__} returned no pixel input the forward takes "
                         f"(outputs: {sorted(out)})")
    token = image_token_id(ctx)
    n = images_per_prompt(ctx)
    written = {int((row == token).sum()) for row in inputs["input_ids"]}
    if len(written) != 1 or next(iter(written)) % n:
        raise ValueError(f"processor writes {sorted(written)} placeholders in the two prompts of {n} image(s) each")
    written_count = written.pop() // n
    side = {k: v for k, v in inputs.items() if k not in TEXT_KEYS}
    emitted = count_placeholders(ctx, side, images=BATCH * n)
    if written_count != emitted:
        raise ValueError(f"processor writes {written_count} placeholders per image, "
                         f"the model's encoder emits {emitted}")
    if is_encoder_decoder(ctx) and "decoder_input_ids" in accepted:  # what generate starts the decoder with
        inputs.update(decoder_inputs(ctx, ctx.generator()))
    notes = {"placeholders": written_count, "processor": type(processor).__name__}
    return Sample(inputs=inputs, strategy="processor", media_keys=media, notes=notes)
