"""The strategies for codebook streams, conditioning audio, token-aligned audio, raw-audio masks and image
generation prompts, on synthetic configs and modules (no real model): shapes and cross-checks."""

from types import SimpleNamespace

import pytest
import torch

from conformance.cases.samples import BATCH, PAD_LEFT, SampleContext
from conformance.cases.strategies import auto_select, get_strategy

HIDDEN = 8


class _Config(SimpleNamespace):
    """A config tree: `get_text_config` resolves the decoder/encoder sub-configs the way transformers does."""

    def get_text_config(self, decoder=None, encoder=None):
        if encoder and getattr(self, "text_encoder", None) is not None:
            return self.text_encoder
        if decoder and getattr(self, "decoder", None) is not None:
            return self.decoder
        return self

    def to_dict(self):
        return {k: (v.to_dict() if isinstance(v, _Config) else v) for k, v in vars(self).items()}


def _ctx(model, config, **recipe):
    return SampleContext(tiny=SimpleNamespace(config=config), model=model, recipe=recipe)


# --------------------------------------------------------------------------- codebook_decoder


def _codebook_config(**extra):
    return _Config(text_encoder=_Config(vocab_size=100, pad_token_id=0),
                   decoder=_Config(vocab_size=64, num_codebooks=4, pad_token_id=64, bos_token_id=64), **extra)


class _CodebookDecoder(torch.nn.Module):
    """Reads decoder_input_ids as (batch * codebooks, steps) batch-major, or only (batch, steps, codebooks)."""

    def __init__(self, flat=True, melody=False):
        super().__init__()
        self.flat = flat
        self.embed = torch.nn.Embedding(65, HIDDEN)
        self.chroma = torch.nn.Linear(12, HIDDEN)
        self.melody = melody

    def forward(self, input_ids=None, attention_mask=None, decoder_input_ids=None, input_features=None):
        if self.flat:
            codes = decoder_input_ids.reshape(-1, 4, decoder_input_ids.shape[-1])  # (batch, K, steps)
        elif decoder_input_ids.dim() != 3:
            raise RuntimeError("view size is not compatible with input tensor's size and stride")
        else:
            codes = decoder_input_ids.transpose(1, 2)
        hidden = self.embed(codes).sum(1)
        if self.melody and input_features is not None:
            hidden = hidden + self.chroma(input_features).mean(1, keepdim=True)
        return SimpleNamespace(logits=hidden)


def test_codebook_decoder_flattens_codebooks_into_the_batch_behind_a_start_token():
    ctx = _ctx(_CodebookDecoder(), _codebook_config())
    sample = get_strategy("codebook_decoder")(ctx)
    codes = sample.inputs["decoder_input_ids"]
    assert tuple(codes.shape) == (BATCH * 4, 3)
    assert (codes[:, 0] == 64).all()  # the decoder start token (bos) first in every stream
    assert (codes[:, 1:] < 64).all()  # then codes of the codebook, never the special id
    assert sample.inputs["input_ids"].max() < 100 and sample.inputs["attention_mask"][0, 0] == 0
    assert sample.media_keys == () and sample.notes["layout"] == "(batch * codebooks, steps)"


def test_codebook_decoder_uses_the_other_documented_layout_where_the_flat_one_is_rejected():
    sample = get_strategy("codebook_decoder")(_ctx(_CodebookDecoder(flat=False), _codebook_config()))
    assert tuple(sample.inputs["decoder_input_ids"].shape) == (BATCH, 3, 4)
    assert "view size" in sample.notes["flat_layout_error"]


def test_codebook_decoder_adds_conditioning_features_as_the_media_input():
    model = _CodebookDecoder(melody=True)
    sample = get_strategy("codebook_decoder")(_ctx(model, _codebook_config(num_chroma=12)))
    assert tuple(sample.inputs["input_features"].shape) == (BATCH, 8, 12)
    assert sample.media_keys == ("input_features",)
    assert not torch.equal(model(**sample.inputs).logits, model(**sample.perturbed().inputs).logits)


def test_codebook_decoder_names_what_the_config_lacks():
    config = _codebook_config()
    del config.decoder.num_codebooks
    with pytest.raises(LookupError, match="num_codebooks / num_channels"):
        get_strategy("codebook_decoder")(_ctx(_CodebookDecoder(), config))


# --------------------------------------------------------------------------- speaker_code_streams


class _DuplexLM(torch.nn.Module):
    def forward(self, input_ids=None, attention_mask=None, moshi_audio_codes=None, user_audio_codes=None):
        return SimpleNamespace(logits=input_ids.float())


def test_speaker_code_streams_align_each_audio_stream_with_the_text():
    config = _Config(vocab_size=100, pad_token_id=0, num_codebooks=3, audio_vocab_size=16)
    ctx = _ctx(_DuplexLM(), config)
    assert auto_select(ctx) == "speaker_code_streams"
    sample = get_strategy("speaker_code_streams")(ctx)
    ids = sample.inputs["input_ids"]
    for key in ("moshi_audio_codes", "user_audio_codes"):
        codes = sample.inputs[key]
        assert tuple(codes.shape) == (BATCH, 3, ids.shape[1])
        assert codes.min() >= 0 and codes.max() < 16  # codes, never the delay-pattern fill id 16
    assert sample.inputs["attention_mask"][0, :PAD_LEFT].sum() == 0 and ids[0, 0] == 0


# --------------------------------------------------------------------------- conditioning_features


class _ConditionedSpeech(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mel = torch.nn.Conv1d(10, HIDDEN, kernel_size=1)
        self.embed = torch.nn.Embedding(100, HIDDEN)

    def forward(self, input_ids=None, attention_mask=None, input_features=None):
        voice = self.mel(input_features)[:, :, 0].unsqueeze(1)  # one conditioning vector per clip
        return {"logits_per_text": torch.cat([voice, self.embed(input_ids)], dim=1).sum(-1)}


def test_conditioning_features_find_the_mel_count_in_a_nested_sub_config():
    config = _Config(vocab_size=100, pad_token_id=0, decoder_config=_Config(feature_size=10, model_type="dec"))
    model = _ConditionedSpeech()
    sample = get_strategy("conditioning_features")(_ctx(model, config, audio_length=7))
    assert tuple(sample.inputs["input_features"].shape) == (BATCH, 10, 7)
    assert "audio" not in str(sample.inputs["input_ids"].tolist())  # no placeholder tokens: plain text
    before = model(**sample.inputs)["logits_per_text"]
    assert not torch.equal(before, model(**sample.perturbed().inputs)["logits_per_text"])


def test_conditioning_features_name_the_missing_mel_count():
    with pytest.raises(LookupError, match="mel-bin count"):
        get_strategy("conditioning_features")(_ctx(_ConditionedSpeech(), _Config(vocab_size=100)))


# --------------------------------------------------------------------------- token_aligned_audio


class _StreamingSpeechLM(torch.nn.Module):
    """One audio embedding per `stride` mel frames, added to the token embedding at that position."""

    def __init__(self, stride=8):
        super().__init__()
        self.conv = torch.nn.Conv1d(4, HIDDEN, kernel_size=stride, stride=stride)
        self.embed = torch.nn.Embedding(100, HIDDEN)

    def get_audio_features(self, input_features=None):
        return SimpleNamespace(pooler_output=self.conv(input_features).transpose(1, 2))

    def forward(self, input_ids=None, attention_mask=None, input_features=None):
        audio = self.get_audio_features(input_features).pooler_output
        return SimpleNamespace(logits=self.embed(input_ids) + audio)


def _streaming_config():
    return _Config(vocab_size=100, pad_token_id=0, hidden_size=HIDDEN, audio_length_per_tok=8,
                   audio_config=_Config(num_mel_bins=4))


def test_token_aligned_audio_gives_every_position_one_audio_embedding():
    model = _StreamingSpeechLM()
    sample = get_strategy("token_aligned_audio")(_ctx(model, _streaming_config()))
    width = sample.inputs["input_ids"].shape[1]
    assert tuple(sample.inputs["input_features"].shape) == (BATCH, 4, width * 8)
    model(**sample.inputs)  # the sums line up
    assert not torch.equal(model(**sample.inputs).logits, model(**sample.perturbed().inputs).logits)


def test_token_aligned_audio_gives_generate_a_longer_clip_and_cross_checks_the_count():
    sample = get_strategy("token_aligned_audio")(_ctx(_StreamingSpeechLM(), _streaming_config()))
    frames = sample.inputs["input_features"].shape[-1]
    assert sample.generate_inputs["input_features"].shape[-1] == frames + 16 * 8
    assert torch.equal(sample.generate_inputs["input_features"][..., :frames], sample.inputs["input_features"])
    with pytest.raises(ValueError, match="not one per prompt position"):
        get_strategy("token_aligned_audio")(_ctx(_StreamingSpeechLM(stride=4), _streaming_config()))


# --------------------------------------------------------------------------- raw-audio padding mask


class _ChunkedSpeechLM(torch.nn.Module):
    """Whisper-window chunks: get_audio_features takes the raw-sample `padding_mask` through **kwargs only."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(4, HIDDEN, kernel_size=2, stride=2)
        self.embed = torch.nn.Embedding(256, HIDDEN)

    def get_audio_features(self, input_features, input_features_mask, **kwargs):
        assert kwargs["padding_mask"].shape[-1] == input_features.shape[-1] * 160
        return SimpleNamespace(pooler_output=self.conv(input_features).transpose(1, 2).reshape(-1, HIDDEN))

    def forward(self, input_ids=None, attention_mask=None, input_features=None, input_features_mask=None,
                padding_mask=None):
        audio = self.get_audio_features(input_features, input_features_mask, padding_mask=padding_mask).pooler_output
        slots = (input_ids == 250).unsqueeze(-1)
        return SimpleNamespace(logits=self.embed(input_ids).masked_scatter(slots, audio))


def test_audio_features_add_a_raw_sample_mask_where_the_forward_takes_one():
    config = _Config(vocab_size=256, hidden_size=HIDDEN, pad_token_id=0, audio_token_id=250,
                     audio_config=_Config(num_mel_bins=4))
    model = _ChunkedSpeechLM()
    sample = get_strategy("audio_features")(_ctx(model, config, audio_length=12))
    assert tuple(sample.inputs["padding_mask"].shape) == (BATCH, 12 * 160)
    assert ((sample.inputs["input_ids"] == 250).sum(-1) == 6).all()
    model(**sample.inputs)


# --------------------------------------------------------------------------- image_generation_grids

START, END, IMAGE = 64, 65, 99


class _ImageGenerator(torch.nn.Module):
    """Patches -> features -> VQ codes that replace the placeholders; target grids only shape positions."""

    def __init__(self):
        super().__init__()
        self.patch = torch.nn.Linear(3 * 8 * 8, HIDDEN)
        self.codebook = torch.nn.Linear(HIDDEN, 64)
        self.embed = torch.nn.Embedding(128, HIDDEN)

    def get_image_features(self, pixel_values, image_grid_thw=None, return_dict=True):
        if pixel_values.dim() != 2 or pixel_values.shape[1] != 3 * 8 * 8:
            raise ValueError("flat C*P*P patches only")
        sizes = image_grid_thw.prod(-1).tolist()
        return SimpleNamespace(pooler_output=list(torch.split(self.patch(pixel_values), sizes)))

    def get_image_tokens(self, features):
        return torch.cat([self.codebook(f).argmax(-1) for f in features])

    def forward(self, input_ids=None, attention_mask=None, pixel_values=None, image_grid_thw=None,
                images_per_sample=None):
        source = torch.cat([g[:-1] for g in torch.split(image_grid_thw, images_per_sample.tolist())])
        codes = self.get_image_tokens(self.get_image_features(pixel_values, source).pooler_output)
        ids = input_ids.masked_scatter(input_ids == IMAGE, codes)
        return SimpleNamespace(logits=self.embed(ids))


def test_image_generation_grids_put_the_source_image_and_the_target_grid_in_each_prompt():
    config = _Config(vocab_size=128, pad_token_id=0, image_start_token_id=START, image_end_token_id=END,
                     image_token_id=IMAGE, vision_config=_Config(image_size=32, patch_size=8, spatial_merge_size=1))
    model = _ImageGenerator()
    sample = get_strategy("image_generation_grids")(_ctx(model, config))
    ids = sample.inputs["input_ids"]
    assert tuple(sample.inputs["pixel_values"].shape) == (BATCH * 16, 3 * 8 * 8)
    assert sample.inputs["image_grid_thw"].tolist() == [[1, 4, 4], [1, 4, 4]] * BATCH  # source, target
    assert sample.inputs["images_per_sample"].tolist() == [2] * BATCH
    assert ((ids == IMAGE).sum(-1) == 16).all()  # the model's own count: one VQ code per patch
    assert (ids[:, -1] == START).all() and ((ids == START).sum(-1) == 2).all() and ((ids == END).sum(-1) == 1).all()
    assert sample.media_keys == ("pixel_values",)
    model(**sample.inputs)
