"""[torch.export] raises at torch._ops:OpOverload.__call__: HiggsAudioV2ForConditionalGeneration (export_generate).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32). Run: python exception-8a07d2fe.py
The suite saw: IndexError: index out of range in self (at _ops.py:875)
Shared by 4 class(es), 12 cell(s) of 6 check(s) (index.json lists them).
"""

import inspect

import torch
from transformers import HiggsAudioV2Config, HiggsAudioV2ForConditionalGeneration

CONFIG = HiggsAudioV2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, pad_token_id=251, eos_token_id=252, head_dim=16, codebook_size=64,
    audio_token_id=255, audio_bos_token_id=253, audio_delay_token_id=254, audio_stream_bos_id=249,
    audio_stream_eos_id=250)
MAX_LEN = 17
NEW_TOKENS = 8


def tiny_model():
    torch.manual_seed(0)
    return HiggsAudioV2ForConditionalGeneration(CONFIG).eval()


# The inputs export_generate fed: token ids literal.
inputs = {
    'input_ids': torch.tensor([[37, 107, 92, 39, 189, 180, 10, 29, 23]], dtype=torch.int64),
    'attention_mask': torch.full((1, 9), 1, dtype=torch.int64),
}

def logits_of(output):
    """The logits of a model output: `logits`, a scorer's first `logits*` field, a tuple's first tensor."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, dict) and "logits" in output:
        return output["logits"]
    if isinstance(getattr(output, "logits", None), torch.Tensor):
        return output.logits
    if isinstance(output, dict):
        for key, value in output.items():
            if key.startswith("logits") and isinstance(value, torch.Tensor):
                return value
    return output[0]


def static_cache(config, max_len, batch_size):
    """The StaticCache generate makes for cache_implementation="static" (the decoder's text config)."""
    from transformers import StaticCache

    params = inspect.signature(StaticCache.__init__).parameters
    kwargs = {"config": config, "max_cache_len": max_len}
    for name in ("max_batch_size", "batch_size"):
        if name in params:
            kwargs[name] = batch_size
    return StaticCache(**kwargs)


def full_static_layers(cache, max_len):
    """Each sliding-window layer whose window holds the whole generation made a plain StaticLayer."""
    from transformers.cache_utils import StaticLayer, StaticSlidingWindowLayer

    for i, layer in enumerate(getattr(cache, "layers", [])):
        if isinstance(layer, StaticSlidingWindowLayer) and layer.max_cache_len >= max_len:
            cache.layers[i] = StaticLayer(max_len)
    return cache


class EmbedPart(torch.nn.Module):
    """The text embedding."""

    def __init__(self, embedding):
        super().__init__()
        self.embedding = embedding

    def forward(self, input_ids):
        return self.embedding(input_ids)


class DecoderPart(torch.nn.Module):
    """The decoder and its head over `inputs_embeds` and a StaticCache of `max_len` tokens (batch 1): without
    `cache_tensors` (the prefill) a fresh cache, returning the last logits and the cache tensors (keys, values,
    length per layer); with them (a step) they back the cache, updated in place; returns the last logits."""

    def __init__(self, owner, max_len, cache_kwarg, text_config):
        super().__init__()
        self.owner, self.max_len, self.cache_kwarg, self.text_config = owner, max_len, cache_kwarg, text_config

    def forward(self, inputs_embeds, cache_tensors=None, **text):
        cache = full_static_layers(static_cache(self.text_config, self.max_len, 1), self.max_len)
        layers = [layer for layer in cache.layers if hasattr(layer, "lazy_initialization")]
        if cache_tensors is not None:
            for layer, i in zip(layers, range(0, len(cache_tensors), 3)):
                keys, values, length = cache_tensors[i:i + 3]
                layer.keys, layer.values, layer.cumulative_length = keys, values, length
                layer.device = keys.device
                layer.batch_size, layer.num_heads = keys.shape[:2]
                layer.k_head_dim, layer.v_head_dim = keys.shape[-1], values.shape[-1]
                layer.is_initialized = True
        else:
            for layer in layers:
                layer.cumulative_length = inputs_embeds.new_zeros((), dtype=torch.long)
        output = self.owner(inputs_embeds=inputs_embeds, use_cache=True, **{self.cache_kwarg: cache}, **text)
        logits = logits_of(output)[:, -1, :]
        if cache_tensors is not None:
            return logits
        return (logits, *[t for layer in layers for t in (layer.keys, layer.values, layer.cumulative_length)])


def export_part(module, args=(), kwargs=None):
    """torch.export.export(strict=False) of one generation part."""
    with torch.no_grad():
        return torch.export.export(module, args, kwargs or {}, strict=False)


model = tiny_model()
owner = model  # the module generate decodes with
placeholders = torch.zeros_like(inputs["input_ids"], dtype=torch.bool)
ids = inputs["input_ids"].masked_fill(placeholders, 0)
text = {k: inputs[k] for k in ['attention_mask']}
embedding = EmbedPart(owner.get_input_embeddings())
decoder = DecoderPart(owner, MAX_LEN, 'cache', owner.config.get_text_config(decoder=True))
programs = {}
programs['embed_prefill'] = export_part(embedding, (ids,))
programs['embed_step'] = export_part(embedding, (ids[:, -1:],))
with torch.no_grad():
    embeds = embedding(ids)
programs['prefill'] = export_part(decoder, (embeds,), dict(text))
with torch.no_grad():
    _, *state = decoder(embeds, **text)
programs['step'] = export_part(decoder, (embeds[:, -1:], state))

def run(name, *args, **kwargs):
    return programs[name].module()(*args, **kwargs)

with torch.no_grad():
    embeds = run("embed_prefill", ids)
    logits, *state = run("prefill", embeds, **text)
    logits_list, tokens = [logits.float()], [logits.argmax(-1, keepdim=True)]
    for _ in range(NEW_TOKENS - 1):
        logits = run("step", run("embed_step", tokens[-1]), list(state))
        logits_list.append(logits.float())
        tokens.append(logits.argmax(-1, keepdim=True))
