"""The processor path: a local tokenizer at the tiny config's ids, tiny image processors, the
`processor` strategy's batch and its cross-check against the encoder's placeholder count."""

from types import SimpleNamespace

import pytest
import torch

from conformance.cases.model_data import FixtureError, load_model_fixture
from conformance.cases.processors import (
    ProcessorSpec,
    ProcessorUnavailable,
    build_processor,
    local_tokenizer,
    processor_class,
    processor_token_strings,
    tiny_media_processor,
    token_ids,
)
from conformance.cases.samples import BATCH, SampleContext
from conformance.cases.strategies import SELECTORS, get_strategy
from conformance.cases.strategies._media import count_placeholders

LLAVA = "LlavaForConditionalGeneration"
CLASS_TOKEN = {"kwargs": {"num_additional_image_tokens": 1}}  # CLIP adds a class token, the encoder drops it


@pytest.fixture(scope="module")
def llava():
    """The tiny LLaVA config and model (eager only, no compile: about a second)."""
    torch.set_num_threads(1)
    from conformance.cases.tiny import new_model, tiny_config
    from conformance.discover import by_name

    tiny = tiny_config(by_name()[LLAVA])
    return tiny, new_model(tiny)


def _ctx(llava, processor_table):
    tiny, model = llava
    return SampleContext(tiny=tiny, model=model, recipe={"strategy": "processor", "processor": processor_table})


def test_tokenizer_puts_special_tokens_at_the_tiny_config_ids(llava):
    config = llava[0].config
    ids = token_ids(config, config.text_config)
    assert ids["image_token"] == config.image_token_index
    assert ids["bos_token"] == config.text_config.bos_token_id
    tokenizer = local_tokenizer(config.text_config.vocab_size, ids, processor_token_strings(processor_class("llava")))
    assert tokenizer.convert_tokens_to_ids("<image>") == config.image_token_index
    assert tokenizer.image_token == "<image>"
    assert tokenizer.bos_token_id == config.text_config.bos_token_id
    assert tokenizer("w7 <image><image> w9")["input_ids"] == [7, config.image_token_index, config.image_token_index, 9]


def test_tokens_the_config_does_not_name_get_free_ids():
    strings = {"image_token": "[IMG]", "image_break_token": "[IMG_BREAK]"}
    tokenizer = local_tokenizer(64, {"image_token": 63}, strings, added=("<fake>",))
    assert tokenizer.convert_tokens_to_ids("[IMG]") == 63
    assert tokenizer.convert_tokens_to_ids("[IMG_BREAK]") == 62
    assert tokenizer.unk_token_id == 61 and tokenizer.convert_tokens_to_ids("<fake>") == 60
    assert tokenizer("<fake><fake> not-a-word w9")["input_ids"] == [60, 60, 61, 9]
    assert tokenizer.pad_token_id == 0 and tokenizer.padding_side == "left"
    batch = tokenizer(["w5", "w5 w6 w7"], padding=True)
    assert batch["attention_mask"][0] == [0, 0, 1]


def test_tokens_a_processor_asks_for_are_recognised():
    from conformance.cases.processors import _missing_token

    assert _missing_token(AttributeError("TokenizersBackend has no attribute boi_token")) == "boi_token"
    assert _missing_token(AttributeError("TokenizersBackend has no attribute boi_token_id")) == "boi_token"
    assert _missing_token(ValueError("Tokenizer is missing required attribute 'image_start_token'. Add ...")) \
        == "image_start_token"
    assert _missing_token(TypeError("has no attribute boi_token")) is None  # only lookups of a token
    assert _missing_token(AttributeError("no attribute patch_size")) is None


def _image_processor_class(model_type):
    """The image processor the processor path uses for `model_type` (the auto mapping names it:
    ``CLIPImageProcessorPil`` in 5.x, ``CLIPImageProcessor`` in 4.x)."""
    from transformers.models.auto.image_processing_auto import IMAGE_PROCESSOR_MAPPING_NAMES

    from conformance.cases.processors import _media_class

    return _media_class(IMAGE_PROCESSOR_MAPPING_NAMES, model_type, "image")


def test_image_processor_sizes_come_from_the_tiny_config():
    vision = SimpleNamespace(patch_size=8, spatial_merge_size=2, temporal_patch_size=2)
    config = SimpleNamespace(vision_config=vision, image_seq_length=9)
    clip = tiny_media_processor(_image_processor_class("clip"), config, (32, 48), {})
    assert clip.size == {"shortest_edge": 32} and clip.crop_size == {"height": 32, "width": 48}
    overrides = {"size": {"shortest_edge": 1024, "longest_edge": 1024}, "extra": "config.image_seq_length"}
    qwen = tiny_media_processor(_image_processor_class("qwen2_vl"), config, (32, 32), overrides)
    assert (qwen.patch_size, qwen.merge_size, qwen.temporal_patch_size) == (8, 2, 2)
    assert qwen.size["longest_edge"] == 1024 and qwen.extra == 9  # fixture values: literal, and a config reference
    from transformers import Emu3ImageProcessor  # a PIL-backed class with pixel-count sizes

    emu3 = tiny_media_processor(Emu3ImageProcessor, config, (32, 48), {})
    assert emu3.min_pixels == emu3.max_pixels == emu3.size["min_pixels"] == 32 * 48


def test_processor_sample_is_a_left_padded_batch_matching_the_encoder(llava):
    ctx = _ctx(llava, CLASS_TOKEN)
    sample = get_strategy("processor")(ctx)
    ids, mask = sample.inputs["input_ids"], sample.inputs["attention_mask"]
    assert sample.strategy == "processor" and sample.media_keys == ("pixel_values",)
    assert set(sample.inputs) == {"input_ids", "attention_mask", "pixel_values"}
    assert ids.shape[0] == BATCH and mask[0, 0] == 0 and mask[1].all()  # only the shorter prompt is padded
    pixels = sample.inputs["pixel_values"]
    assert pixels.shape == (BATCH, 3, 32, 32) and not torch.equal(pixels[0], pixels[1])
    token = ctx.config.image_token_index
    written = (ids == token).sum(-1).tolist()
    emitted = count_placeholders(ctx, {"pixel_values": pixels}, images=BATCH)
    assert written == [emitted] * BATCH == [sample.notes["placeholders"]] * BATCH
    assert not torch.equal(ids[0][mask[0] == 1], ids[1][mask[1] == 1])


def test_a_processor_count_the_encoder_disagrees_with_is_refused(llava):
    ctx = _ctx(llava, {})  # no class token counted: the processor writes one placeholder too few
    with pytest.raises(ValueError, match=r"^processor writes 15 placeholders per image, the model's encoder emits 16$"):
        get_strategy("processor")(ctx)


def test_processor_failures_are_one_clear_line(llava):
    config = llava[0].config
    with pytest.raises(ProcessorUnavailable, match="no processor class to model_type 'not_a_model'"):
        processor_class("not_a_model")
    spec = ProcessorSpec(kwargs={"patch_size": "config.vision_config.no_such_size"})
    with pytest.raises(ProcessorUnavailable, match="'config.vision_config.no_such_size', which the tiny config"):
        build_processor(config, "llava", spec, (32, 32), config.text_config)


def test_processor_strategy_is_chosen_by_data_only():
    get_strategy("processor")
    assert "processor" not in {name for _, _, name in SELECTORS}


def test_fixture_processor_table_is_validated(tmp_path):
    good = tmp_path / "llava.toml"
    good.write_text('about = "x"\n[samples]\nstrategy = "processor"\n[samples.processor]\n'
                    'kwargs = { num_additional_image_tokens = 1 }\nprompt = "{image_token}"\nimage_size = [32, 64]\n')
    assert load_model_fixture(good, check_model_type=False).samples["processor"]["image_size"] == [32, 64]
    bad = tmp_path / "llava2.toml"
    bad.write_text('about = "x"\n[samples.processor]\nkwarg = { a = 1 }\n')
    with pytest.raises(FixtureError, match="unknown key 'samples.processor.kwarg'"):
        load_model_fixture(bad, check_model_type=False)
    bad.write_text('about = "x"\n[samples.processor]\nimage_size = "big"\n')
    with pytest.raises(FixtureError, match="image_size' must be an int or"):
        load_model_fixture(bad, check_model_type=False)


def test_a_processor_that_checks_its_tokenizer_class_gets_that_fast_class():
    from transformers import PreTrainedTokenizerFast

    from conformance.cases.processors import _checked_tokenizer_class

    processor_class = SimpleNamespace(tokenizer_class=("SomeSlowTokenizer", "PreTrainedTokenizerFast"))
    error = TypeError("Received a X for argument tokenizer, but a ('A', 'B') was expected.")  # 4.x's check
    assert _checked_tokenizer_class(processor_class, error) is PreTrainedTokenizerFast
    assert _checked_tokenizer_class(processor_class, TypeError("other")) is None
    assert _checked_tokenizer_class(SimpleNamespace(tokenizer_class="AutoTokenizer"), error) is None


def test_a_fixture_kwarg_the_processor_does_not_take_makes_it_unavailable(llava):
    config = llava[0].config
    with pytest.raises(ProcessorUnavailable, match=r"LlavaProcessor.__init__ takes no 'no_such_kwarg'"):
        build_processor(config, "llava", ProcessorSpec(kwargs={"no_such_kwarg": 1}), (32, 32), config.text_config)


def test_an_unavailable_processor_gives_the_model_derived_sample_and_says_so(llava):
    from conformance.cases.strategies import auto_select
    from conformance.cases.strategies.processor import FALLBACK_SUFFIX

    ctx = _ctx(llava, {"kwargs": {"no_such_kwarg": 1}})
    sample = get_strategy("processor")(ctx)
    derived = get_strategy(auto_select(ctx))(ctx)
    assert sample.strategy == derived.strategy + FALLBACK_SUFFIX
    assert "takes no 'no_such_kwarg'" in sample.notes["processor_unavailable"]
    assert sample.inputs.keys() == derived.inputs.keys()
    assert all(torch.equal(sample.inputs[k], derived.inputs[k]) for k in derived.inputs)
