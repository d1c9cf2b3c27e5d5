"""Audio shrink rules and audio sample strategies on synthetic configs and modules (no real models)."""

from types import SimpleNamespace

import torch

from conformance.cases.samples import BATCH, SampleContext
from conformance.cases.shrink_audio import CODEBOOK, MEL_BINS, SOURCE_POSITIONS, shrink_audio
from conformance.cases.strategies import auto_select, get_strategy
from conformance.cases.strategies.audio_media import first_that_runs, mel_bins

AUDIO_TOKEN = 250
HIDDEN = 8


class _Config(SimpleNamespace):
    def get_text_config(self, *a, **k):
        return self

    def to_dict(self):
        return {k: v for k, v in vars(self).items() if not isinstance(v, SimpleNamespace)}


class _SpeechLM(torch.nn.Module):
    """A speech LM in miniature: a stride-2 conv over mel frames, placeholders filled by masked_scatter.

    `time_major` makes it take (batch, frames, mel) like Speech2Text or Granite.
    """

    def __init__(self, mel=4, time_major=False):
        super().__init__()
        self.time_major = time_major
        self.conv = torch.nn.Conv1d(mel, HIDDEN, kernel_size=2, stride=2)
        self.embed = torch.nn.Embedding(256, HIDDEN)
        self.head = torch.nn.Linear(HIDDEN, 256)

    def get_audio_features(self, input_features, input_features_mask):
        if self.time_major:
            input_features = input_features.transpose(1, 2)
        frames = self.conv(input_features).transpose(1, 2)  # (batch, frames / 2, hidden)
        keep = input_features_mask[:, ::2].bool()
        return SimpleNamespace(pooler_output=frames[keep])

    def forward(self, input_ids=None, attention_mask=None, input_features=None, input_features_mask=None):
        embeds = self.embed(input_ids)
        audio = self.get_audio_features(input_features, input_features_mask).pooler_output
        slots = (input_ids == AUDIO_TOKEN).unsqueeze(-1)
        if int(slots.sum()) != audio.shape[0]:
            raise ValueError(f"tokens {int(slots.sum())} != features {audio.shape[0]}")
        return SimpleNamespace(logits=self.head(embeds.masked_scatter(slots, audio)))


def _ctx(model, **config):
    config = _Config(vocab_size=256, hidden_size=HIDDEN, pad_token_id=0, audio_token_id=AUDIO_TOKEN,
                     audio_config=SimpleNamespace(num_mel_bins=4), **config)
    return SampleContext(tiny=SimpleNamespace(config=config), model=model, recipe={"audio_length": 12})


def test_shrink_audio_makes_sizes_tiny_in_nested_configs():
    tree = {"audio_config": {"max_source_positions": 1500, "num_mel_bins": 128, "hidden_size": 64},
            "codec_config": {"codebook_size": 2048, "hidden_size": 64, "upsample_groups": 512},
            "text_config": {"vocab_size": 256}}
    out = shrink_audio(tree)
    assert out["audio_config"] == {"max_source_positions": SOURCE_POSITIONS, "num_mel_bins": MEL_BINS,
                                   "hidden_size": 64}
    assert out["codec_config"] == {"codebook_size": CODEBOOK, "hidden_size": 64, "upsample_groups": 64}
    assert out["text_config"] == {"vocab_size": 256}


def test_shrink_audio_keeps_small_sizes_and_text_trees():
    tree = {"num_mel_bins": 8, "max_source_positions": 16, "d_model": 64, "id2label": {"0": "a"}}
    assert shrink_audio(tree) == tree


def test_audio_features_expands_placeholders_to_what_the_model_emits():
    ctx = _ctx(_SpeechLM())
    assert auto_select(ctx) == "audio_features"
    sample = get_strategy("audio_features")(ctx)
    assert sample.media_keys == ("input_features",)
    assert tuple(sample.inputs["input_features"].shape) == (BATCH, 4, 12)
    assert ((sample.inputs["input_ids"] == AUDIO_TOKEN).sum(-1) == 12 // 2).all()
    assert sample.inputs["attention_mask"][0, 0] == 0  # first row left-padded
    ctx.model(**sample.inputs)  # the forward accepts it: counts agree


def test_audio_features_finds_a_time_major_layout():
    sample = get_strategy("audio_features")(_ctx(_SpeechLM(time_major=True)))
    assert tuple(sample.inputs["input_features"].shape) == (BATCH, 12, 4)


def test_perturbing_audio_features_changes_the_logits():
    model = _SpeechLM()
    sample = get_strategy("audio_features")(_ctx(model))
    before = model(**sample.inputs).logits
    after = model(**sample.perturbed().inputs).logits
    assert not torch.equal(before, after)


def test_mel_bins_multiplies_stacked_frames():
    ctx = _ctx(_SpeechLM(), num_stacked_frames=7)
    assert mel_bins(ctx) == 4 * 7


def test_first_that_runs_prefers_the_accepted_candidate_and_falls_back_to_the_first():
    class Picky(torch.nn.Module):
        def forward(self, x):
            if x.shape[-1] != 3:
                raise RuntimeError("wrong layout")

    ctx = SampleContext(tiny=SimpleNamespace(config=None), model=Picky(), recipe={})
    a, b = {"x": torch.zeros(2, 3, 5)}, {"x": torch.zeros(2, 5, 3)}
    assert first_that_runs(ctx, [a, b]) is b
    assert first_that_runs(ctx, [a, a]) is a


def test_code_streams_put_text_and_codes_side_by_side():
    class Streams(torch.nn.Module):
        def forward(self, input_ids=None, attention_mask=None):
            pass

    ctx = _ctx(Streams(), num_codebooks=3, codebook_vocab_size=16, audio_pad_token_id=300)
    assert auto_select(ctx) == "audio_code_streams"
    ids = get_strategy("audio_code_streams")(ctx).inputs["input_ids"]
    assert ids.shape[0] == BATCH and ids.shape[-1] == 1 + 3
    assert (ids[0, 0, 1:] == 300).all()  # left padding of the code columns
    valid = ids[1, :, 1:]
    assert (valid < 16).all()


def test_shrink_audio_keeps_codec_stages_with_one_block_each():
    out = shrink_audio({"downsampling_ratios": [2, 4, 5], "depths": [3, 3, 3, 8]})
    assert out == {"downsampling_ratios": [2, 4, 5], "depths": [1, 1, 1, 1]}
    assert shrink_audio({"depths": [2, 2]}) == {"depths": [2, 2]}  # not a codec: untouched
