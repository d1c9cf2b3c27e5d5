"""[ONNX] wrong numbers at prefill: Dots3NoteForConditionalGeneration (onnx_generate).

Seen with transformers 5.24.0, torch 2.13.0+cpu (cpu, float32); needs onnxruntime too. Run: python
numerical_mismatch-c83fb278.py
The suite saw: prefill of the exported parts vs eager generate: logits differ by 0.000475 > 0.0001 (the same parts
run eagerly agree with generate)
Shared by 1 class(es), 1 cell(s) of 1 check(s) (index.json lists them).
"""

import inspect
import os
import tempfile

import torch
from transformers import (Dots3NoteAudioConfig, Dots3NoteConfig, Dots3NoteForConditionalGeneration, Dots3NoteTextConfig,
    Dots3NoteVisionConfig)

CONFIG = Dots3NoteConfig(
    text_config=Dots3NoteTextConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
        moe_intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
        n_routed_experts=4, kv_lora_rank=32, q_lora_rank=32, qk_rope_head_dim=8, v_head_dim=16, qk_nope_head_dim=8,
        num_experts_per_tok=2, pad_token_id=251, bos_token_id=250, eos_token_id=253,
        rope_parameters={
            'indexed_attention': {'rope_type': 'default', 'rope_theta': 80000000.0, 'partial_rotary_factor': 0.5},
            'sliding_attention': {'rope_type': 'default', 'rope_theta': 50000.0, 'partial_rotary_factor': 0.5},
        },
        mlp_layer_types=['dense', 'sparse'], index_head_dim=16, index_n_heads=4, head_dim=16,
        layer_types=['indexed_attention', 'sliding_attention'], shared_experts_intermediate_size=128,
        per_layer_config={}),
    vision_config=Dots3NoteVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, patch_size=8, moe_intermediate_size=128, mlp_layer_types=['dense', 'sparse'],
        num_local_experts=4, adapter_in_dim=64, adapter_out_dim=64, per_layer_config={}),
    audio_config=Dots3NoteAudioConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, downsample_hidden_size=64, head_dim=16, adapter_input_size=64,
        adapter_out_dim=64, conv_output_size=7680),
    image_token_id=252, video_token_id=254, audio_token_id=255)
MAX_LEN = 21
NEW_TOKENS = 1
ATOL = 0.0001
RTOL = 1.3e-06


def tiny_model():
    """A fresh tiny model as the suite builds it: seed 0, weights left all zero get small random values."""
    torch.manual_seed(0)
    model = Dots3NoteForConditionalGeneration(CONFIG)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.is_floating_point() and not name.endswith("bias") and not param.any():
                param.normal_(0.0, 0.02)
    return model.eval()


# The inputs onnx_generate fed: token ids literal; pixel_values seeded random of the recorded shape.
g = torch.Generator().manual_seed(0)
inputs = {
    'input_ids': torch.tensor([[153, 99, 85, 52] + [252] * 4 + [6, 151, 56, 186, 77]], dtype=torch.int64),
    'attention_mask': torch.full((1, 13), 1, dtype=torch.int64),
    'pixel_values': torch.randn((16, 192), generator=g, dtype=torch.float32),
    'image_grid_thw': torch.tensor([[1, 4, 4]], dtype=torch.int64),
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


def close(actual, expected, atol, rtol):
    """(within, "<diff> > <allowed>" at the worst element): |actual - expected| <= atol + rtol * |expected|
    elementwise, equal entries (two equal infinities too) differ by 0, NaN is beyond any tolerance."""
    if actual.shape != expected.shape:
        raise AssertionError(f"logits shape {tuple(actual.shape)} != expected {tuple(expected.shape)}")
    if not actual.numel():
        return True, ""
    a, e = actual.detach().double().flatten(), expected.detach().double().flatten()
    delta, allowed = torch.where(a == e, torch.zeros_like(a), (a - e).abs()), atol + rtol * e.abs()
    ratios = delta / allowed
    worst = int(ratios.isnan().nonzero()[0]) if ratios.isnan().any() else int(ratios.argmax())
    return bool(ratios[worst] <= 1.0), f"{float(delta[worst]):.3g} > {float(allowed[worst]):.3g}"


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


def image_features(output):
    """Features as [tokens, hidden]: `pooler_output`, a tensor, or a list of them."""
    pooled = getattr(output, "pooler_output", None)
    if isinstance(pooled, (torch.Tensor, list, tuple)):
        output = pooled
    elif not isinstance(output, (torch.Tensor, list, tuple)) and hasattr(output, "last_hidden_state"):
        output = output.last_hidden_state
    if isinstance(output, (list, tuple)):
        return torch.cat([image_features(o) for o in output], dim=0)
    return output.reshape(-1, output.shape[-1])


class VisionPart(torch.nn.Module):
    """Vision encoder + projector: media -> the placeholder features [tokens, hidden]."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        # transformers' exporters read `model.config` of what they export (their input preparers for NaViT-style
        # encoders do), as its own components, PreTrainedModels, have it: the part carries its model's.
        self.config = model.config

    def forward(self, **media):
        return image_features(self.model.get_image_features(**media))


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


def eager_generation(model, inputs, new_tokens):
    """(the `new_tokens` greedy tokens, each step's logits) of eager generate, end-of-sequence ignored."""
    config = model.generation_config
    config.eos_token_id = None
    if config.pad_token_id is None:
        config.pad_token_id = 0
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                             num_beams=1, output_logits=True, return_dict_in_generate=True)
    return out.sequences[:, -new_tokens:], list(out.logits)


def leaf_feed(kwargs):
    """Tensor leaves of keyword inputs by dotted path (``name``, ``name.0``, ...): the ONNX graph's input names."""
    feed = {}

    def walk(value, prefix):
        if isinstance(value, torch.Tensor):
            feed[prefix] = value
        elif isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                walk(item, f"{prefix}.{index}")
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{prefix}.{key}")

    for key, value in kwargs.items():
        walk(value, key)
    return feed


def onnx_export(module, kwargs, path):
    """`module(**kwargs)` to an ONNX file (weights beside it) with transformers' OnnxExporter; the feed (input
    name -> tensor) the graph was traced with."""
    from transformers.exporters import OnnxConfig, OnnxExporter

    with torch.no_grad():
        exported = OnnxExporter().export(module, kwargs, OnnxConfig())  # adds the inputs it precomputes
        OnnxExporter.save_program(exported.program, path)
    return leaf_feed(kwargs)


class OrtProgram:
    """An ONNX file in an ONNX Runtime CPU session: `program(feed) -> {output name: tensor}`."""

    def __init__(self, path):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, torch.get_num_threads())
        options.log_severity_level = 3
        self.session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        self.inputs = [spec.name for spec in self.session.get_inputs()]
        self.outputs = [spec.name for spec in self.session.get_outputs()]

    def __call__(self, feed):
        def lookup(name):  # transformers' exporter prefixes an input it also returns (a mutated one) with `input.`
            return feed[name] if name in feed else feed.get(name.removeprefix("input."))

        missing = [name for name in self.inputs if lookup(name) is None]
        if missing:
            raise AssertionError(f"onnxruntime run: the graph takes {missing}, which the inputs {list(feed)} "
                                 "do not hold")
        arrays = {name: lookup(name).detach().cpu().contiguous().numpy() for name in self.inputs}
        values = self.session.run(None, arrays)
        return {name: torch.from_numpy(value) for name, value in zip(self.outputs, values)}


model = tiny_model()
owner = model  # the module generate decodes with
placeholders = inputs["input_ids"] == 252
ids = inputs["input_ids"].masked_fill(placeholders, 0)
media = {k: inputs[k] for k in ['image_grid_thw', 'pixel_values']}
text = {k: inputs[k] for k in ['attention_mask']}
embedding = EmbedPart(owner.get_input_embeddings())
decoder = DecoderPart(owner, MAX_LEN, 'cache', owner.config.get_text_config(decoder=True))
folder = tempfile.mkdtemp()
sessions = {}

def onnx_part(name, module, kwargs):
    path = os.path.join(folder, name, "model.onnx")
    os.makedirs(os.path.dirname(path))
    onnx_export(module, kwargs, path)
    sessions[name] = OrtProgram(path)

onnx_part('vision', VisionPart(model.model), dict(media))
onnx_part('embed_prefill', embedding, {"input_ids": ids})
with torch.no_grad():  # the decoder runs once the parts before it are exported
    embeds = embedding(ids)
onnx_part('prefill', decoder, {"inputs_embeds": embeds, **text})
POSITIONAL = {'embed_prefill': ('input_ids',), 'embed_step': ('input_ids',), 'prefill': ('inputs_embeds',),
              'step': ('inputs_embeds', 'cache_tensors')}

def ort(name, *args, **kwargs):
    named = dict(zip(POSITIONAL.get(name, ()), args), **kwargs)
    outputs = list(sessions[name](leaf_feed(named)).values())
    return outputs[0] if len(outputs) == 1 else outputs

with torch.no_grad():
    embeds = ort("embed_prefill", ids)
    features = ort("vision", **media).to(embeds.dtype)
    if features.numel() != int(placeholders.sum()) * embeds.shape[-1]:
        raise AssertionError(f"vision part gives {tuple(features.shape)} features for "
                                  f"{int(placeholders.sum())} placeholders")
    embeds = embeds.masked_scatter(placeholders.unsqueeze(-1), features)
    logits, *state = ort("prefill", embeds, **text)
    logits_list, tokens = [logits.float()], [logits.argmax(-1, keepdim=True)]
logits = logits_list
reference = tiny_model()
expected, expected_logits = eager_generation(reference, inputs, NEW_TOKENS)
exported = torch.cat(tokens, dim=1)
if not torch.equal(exported, expected):
    step = int((exported != expected).int().argmax())
    raise AssertionError(f"tokens from the exported parts differ from eager generate at new token {step}: "
                         f"{exported[0].tolist()} vs {expected[0].tolist()}")
for step, (actual, wanted) in enumerate(zip(logits, expected_logits)):
    within, beyond = close(actual, wanted.float(), ATOL, RTOL)
    if not within:
        step_name = "prefill" if step == 0 else f"decode step {step}"
        raise AssertionError(f"{step_name} of the exported parts vs eager generate: logits differ by {beyond}")
