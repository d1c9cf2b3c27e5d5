# Standalone reproducer of findings group contract-666d42ee: contract at served traced, longer, not image_size (images twice as wide): onnxruntime run of part 'vision': Fail: Add node. Name:'node_add_13' Status Message: void onnxruntime::BroadcastIterator::Init# axis == # || axis == largest was false. Attempting to broadcast an axis by a dimension other than # # by #
#
# Seen with transformers 5.24.0, torch 2.13.0+cpu, cpu / float32 / backend eager. Needs only torch and
#   transformers (ONNX checks: onnxruntime too); no weights, no network.
# Fingerprint the suite recorded: {"kind": "contract", "what": "served traced, longer, not image_size (images
#   twice as wide): onnxruntime run of part 'vision': Fail: Add node. Name:'node_add_13' Status Message: void
#   onnxruntime::BroadcastIterator::Init# axis == # || axis == largest was false. Attempting to broadcast an axis
#   by a dimension other than # # by #"}
# Covers 1 class(es), 1 cell(s): DeepseekOcr2ForConditionalGeneration; checks: onnx_generate (1).
# Cells: DeepseekOcr2ForConditionalGeneration (onnx_generate).
# This script: DeepseekOcr2ForConditionalGeneration / onnx_generate (a tiny random
#   DeepseekOcr2ForConditionalGeneration from the config below, the inputs the check fed, the check's steps up to
#   the failure).
#
# Diagnosis: contract at `served traced, longer, not image_size (images twice as wide): onnxruntime run of part
#   'vision': Fail: Add node. Name:'node_add_13' Status Message: void onnxruntime::BroadcastIterator::Init# axis
#   == # || axis == largest was false. Attempting to broadcast an axis by a dimension other than # # by #` (site
#   in no code site). The suite's message, masked: served traced, longer, not image_size (images twice as wide):
#   onnxruntime run of part 'vision': Fail: Add node. Name:'node_add_13' Status Message: void
#   onnxruntime::BroadcastIterator::Init# axis == # || axis == largest was false. Attempting to broadcast an axis
#   by a dimension other than # # by #
#
# Inputs: token ids and masks as recorded; pixel_values seeded random of the recorded shapes (the suite's media
#   are random too, the values differ).
# Run: python this_file.py. The last line it prints is REPRO-RESULT {json}: the failure's fingerprint by the
#   suite's rules (raised: false when nothing failed).

import inspect
import os
import sys
import tempfile

import torch
import transformers
from transformers import DeepseekOcr2ForConditionalGeneration
from transformers import DeepseekOcr2Config

CONFIG = {
    'output_hidden_states': False,
    'return_dict': True,
    'dtype': None,
    'chunk_size_feed_forward': 0,
    'is_encoder_decoder': False,
    'id2label': {0: 'LABEL_0', 1: 'LABEL_1'},
    'label2id': {'LABEL_0': 0, 'LABEL_1': 1},
    'problem_type': None,
    'vision_config': {
        'architectures': None,
        'output_hidden_states': False,
        'return_dict': True,
        'dtype': None,
        'chunk_size_feed_forward': 0,
        'is_encoder_decoder': False,
        'id2label': {0: 'LABEL_0', 1: 'LABEL_1'},
        'label2id': {'LABEL_0': 0, 'LABEL_1': 1},
        'problem_type': None,
        'sam_config': {
            'architectures': None,
            'output_hidden_states': False,
            'return_dict': True,
            'dtype': None,
            'chunk_size_feed_forward': 0,
            'is_encoder_decoder': False,
            'id2label': {0: 'LABEL_0', 1: 'LABEL_1'},
            'label2id': {'LABEL_0': 0, 'LABEL_1': 1},
            'problem_type': None,
            'hidden_size': 64,
            'output_channels': 64,
            'num_hidden_layers': 2,
            'num_attention_heads': 4,
            'num_channels': 3,
            'image_size': 32,
            'patch_size': 8,
            'hidden_act': 'gelu',
            'layer_norm_eps': 1e-06,
            'attention_dropout': 0.0,
            'initializer_range': 0.02,
            'qkv_bias': True,
            'mlp_ratio': 4.0,
            'use_abs_pos': True,
            'use_rel_pos': True,
            'window_size': 14,
            'global_attn_indexes': [0, 1],
            'mlp_dim': 128,
            'downsample_channels': [64, 64],
            'scale': 384,
            '_name_or_path': '',
            'model_type': 'deepseek_ocr2_sam_vision_model',
            'output_attentions': False,
        },
        'encoder_config': {
            'architectures': None,
            'output_hidden_states': False,
            'return_dict': True,
            'dtype': None,
            'chunk_size_feed_forward': 0,
            'is_encoder_decoder': False,
            'id2label': {0: 'LABEL_0', 1: 'LABEL_1'},
            'label2id': {'LABEL_0': 0, 'LABEL_1': 1},
            'problem_type': None,
            'vocab_size': 256,
            'hidden_size': 64,
            'intermediate_size': 128,
            'num_hidden_layers': 2,
            'num_attention_heads': 4,
            'num_key_value_heads': 4,
            'hidden_act': 'silu',
            'max_position_embeddings': 32768,
            'initializer_range': 0.02,
            'rms_norm_eps': 1e-06,
            'use_cache': True,
            'tie_word_embeddings': False,
            'rope_parameters': {'rope_theta': 10000.0, 'rope_type': 'default'},
            'use_sliding_window': False,
            'sliding_window': None,
            'max_window_layers': 2,
            'layer_types': ['full_attention', 'full_attention'],
            'attention_dropout': 0.0,
            'pad_token_id': None,
            'bos_token_id': None,
            'eos_token_id': None,
            '_name_or_path': '',
            'model_type': 'deepseek_ocr2_encoder',
            'output_attentions': False,
        },
        '_name_or_path': '',
        'model_type': 'deepseek_ocr2_vision',
        'output_attentions': False,
    },
    'text_config': {
        'architectures': None,
        'output_hidden_states': False,
        'return_dict': True,
        'dtype': None,
        'chunk_size_feed_forward': 0,
        'is_encoder_decoder': False,
        'id2label': {0: 'LABEL_0', 1: 'LABEL_1'},
        'label2id': {'LABEL_0': 0, 'LABEL_1': 1},
        'problem_type': None,
        'vocab_size': 256,
        'hidden_size': 64,
        'intermediate_size': 128,
        'num_hidden_layers': 2,
        'num_attention_heads': 4,
        'num_key_value_heads': 4,
        'hidden_act': 'silu',
        'max_position_embeddings': 2048,
        'initializer_range': 0.02,
        'rms_norm_eps': 1e-06,
        'use_cache': True,
        'pad_token_id': None,
        'bos_token_id': 1,
        'eos_token_id': 2,
        'pretraining_tp': 1,
        'tie_word_embeddings': False,
        'rope_parameters': {'rope_theta': 10000.0, 'rope_type': 'default'},
        'attention_bias': False,
        'attention_dropout': 0.0,
        'mlp_bias': False,
        'head_dim': 16,
        'n_group': None,
        'n_routed_experts': 4,
        'output_router_logits': False,
        'n_shared_experts': 1,
        'routed_scaling_factor': 1.0,
        'topk_group': None,
        'topk_method': 'greedy',
        'num_experts_per_tok': 2,
        'moe_intermediate_size': 128,
        'mlp_layer_types': ['dense', 'sparse'],
        '_name_or_path': '',
        'model_type': 'deepseek_ocr2_text',
        'output_attentions': False,
    },
    'image_token_id': 255,
    'tie_word_embeddings': False,
    'model_type': 'deepseek_ocr2',
    'output_attentions': False,
}
MAX_LEN = 162
NEW_TOKENS = 4
ATOL = 0.0001
RTOL = 1.3e-06
EXPORTER = 'transformers'


def tiny_model():
    """A fresh tiny DeepseekOcr2ForConditionalGeneration with the suite's deterministic random weights (seed 0; weights left all
    zero by the initialisation get small random values, so that every input path shows in the logits)."""
    torch.manual_seed(0)
    model = DeepseekOcr2ForConditionalGeneration(DeepseekOcr2Config.from_dict(CONFIG))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.is_floating_point() and not name.endswith("bias") and not param.any():
                param.normal_(0.0, 0.02)
    return model.eval()


def sample_inputs():
    """The inputs onnx_generate fed (token ids literal, media seeded random: see the header)."""
    g = torch.Generator().manual_seed(0)
    return {
        'input_ids': torch.tensor([[153, 99, 85, 52] + [255] * 145 + [6, 151, 56, 186, 77]], dtype=torch.int64),
        'attention_mask': torch.full((1, 154), 1, dtype=torch.int64),
        'pixel_values': torch.randn((1, 3, 32, 32), generator=g, dtype=torch.float32),
    }


# --- the check's pieces (vlm-conformance's rules, restated) ---

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


def close(actual, expected, atol, rtol=1.3e-6):
    """(within, "<diff> > <allowed>" at the worst element): |actual - expected| <= atol + rtol * |expected|
    elementwise, equal entries (two equal infinities too) differ by 0, NaN is beyond any tolerance."""
    if actual.shape != expected.shape:
        raise AssertionError(f"logits shape {tuple(actual.shape)} != expected {tuple(expected.shape)}")
    if not actual.numel():
        return True, ""
    a, e = actual.detach().double(), expected.detach().double()
    delta = torch.where(a == e, torch.zeros_like(a), (a - e).abs())
    allowed = atol + rtol * e.abs()
    ratios = (delta / allowed).flatten()
    nan = torch.isnan(ratios)
    worst = int(nan.nonzero()[0]) if nan.any() else int(ratios.argmax())
    within = not nan.any() and float(ratios[worst]) <= 1.0
    return within, f"{float(delta.flatten()[worst]):.3g} > {float(allowed.flatten()[worst]):.3g}"


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


class FunctionalStep(DecoderPart):
    """The decode step with the cache as explicit inputs and outputs (ONNX has no in-place update of an input)."""

    def forward(self, inputs_embeds, cache_tensors=None, **text):
        state = [t.clone() for t in cache_tensors]
        return (super().forward(inputs_embeds, state, **text), *state)


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


def onnx_export(module, kwargs, path, exporter):
    """`module(**kwargs)` to an ONNX file (weights beside it) with transformers' OnnxExporter, or torch.onnx's
    dynamo exporter over a non-strict torch.export; the feed (input name -> tensor) the graph was traced with."""
    with torch.no_grad(), failing_as("exception"):
        if exporter == "transformers":
            from transformers.exporters import OnnxConfig, OnnxExporter

            exported = OnnxExporter().export(module, kwargs, OnnxConfig())  # adds the inputs it precomputes
            OnnxExporter.save_program(exported.program, path)
            return leaf_feed(kwargs)
        feed = leaf_feed(kwargs)
        program = torch.export.export(module.eval(), (), kwargs=dict(kwargs), strict=False)
        onnx_program = torch.onnx.export(program, (), kwargs=dict(kwargs), dynamo=True, input_names=list(feed),
                                         external_data=True, optimize=True, verbose=False)
        onnx_program.save(path, external_data=True)
        return feed


class OrtProgram:
    """An ONNX file in an ONNX Runtime CPU session: `program(feed) -> {output name: tensor}`."""

    def __init__(self, path):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, torch.get_num_threads())
        options.log_severity_level = 3
        with failing_as("exception"):
            self.session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        self.inputs = [spec.name for spec in self.session.get_inputs()]
        self.outputs = [spec.name for spec in self.session.get_outputs()]

    def __call__(self, feed):
        def lookup(name):  # transformers' exporter prefixes an input it also returns (a mutated one) with `input.`
            return feed[name] if name in feed else feed.get(name.removeprefix("input."))

        missing = [name for name in self.inputs if lookup(name) is None]
        if missing:
            raise Finding("contract", f"onnxruntime run: the graph takes {missing}, which the inputs {list(feed)} "
                                      "do not hold")
        arrays = {name: lookup(name).detach().cpu().contiguous().numpy() for name in self.inputs}
        with failing_as("exception"):
            values = self.session.run(None, arrays)
        return {name: torch.from_numpy(value) for name, value in zip(self.outputs, values)}


def reproduce():
    """onnx_generate: the steps up to the failure."""
    inputs = sample_inputs()  # batch 1: the sample's second prompt, its padding removed
    model = tiny_model()
    owner = model  # the module generate decodes with
    placeholders = inputs["input_ids"] == 255
    ids = inputs["input_ids"].masked_fill(placeholders, 0)
    media = {k: inputs[k] for k in ['pixel_values']}
    text = {k: inputs[k] for k in ['attention_mask']}
    embedding = EmbedPart(owner.get_input_embeddings())
    decoder = DecoderPart(owner, MAX_LEN, 'cache', owner.config.get_text_config(decoder=True))
    folder = tempfile.mkdtemp()
    sessions = {}

    def onnx_part(name, module, kwargs):
        path = os.path.join(folder, name, "model.onnx")
        os.makedirs(os.path.dirname(path))
        onnx_export(module, kwargs, path, EXPORTER)
        sessions[name] = OrtProgram(path)

    onnx_part('vision', VisionPart(model), dict(media))
    onnx_part('embed_prefill', embedding, {"input_ids": ids})
    onnx_part('embed_step', embedding, {"input_ids": ids[:, -1:]})
    with torch.no_grad():  # the decoder runs once the parts before it are exported
        embeds = embedding(ids)
        _, *state = decoder(embeds, **text)
    onnx_part('prefill', decoder, {"inputs_embeds": embeds, **text})
    onnx_part('step', FunctionalStep(owner, MAX_LEN, 'cache', owner.config.get_text_config(decoder=True)), {"inputs_embeds": embeds[:, -1:], "cache_tensors": state})
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
            raise Finding("contract", f"vision part gives {tuple(features.shape)} features for "
                                      f"{int(placeholders.sum())} placeholders")
        embeds = embeds.masked_scatter(placeholders.unsqueeze(-1), features)
        logits, *state = ort("prefill", embeds, **text)
        logits_list, tokens = [logits.float()], [logits.argmax(-1, keepdim=True)]
        for _ in range(NEW_TOKENS - 1):
            logits, *state = ort("step", ort("embed_step", tokens[-1]), list(state))
            logits_list.append(logits.float())
            tokens.append(logits.argmax(-1, keepdim=True))
    logits = logits_list
    onnx_tokens, onnx_logits = torch.cat(tokens, dim=1), logits
    reference = tiny_model()
    expected_tokens, expected_logits = eager_generation(reference, inputs, NEW_TOKENS)
    expected_logits = [x.float() for x in expected_logits]
    ref_owner = reference
    ref_embedding = EmbedPart(ref_owner.get_input_embeddings())
    modules = {'embed_prefill': ref_embedding, 'embed_step': ref_embedding,
               'prefill': DecoderPart(ref_owner, MAX_LEN, 'cache', ref_owner.config.get_text_config(decoder=True)),
               'step': FunctionalStep(ref_owner, MAX_LEN, 'cache', ref_owner.config.get_text_config(decoder=True))}
    modules['vision'] = VisionPart(reference)

    def eager_part(name, *args, **kwargs):
        out = modules[name](*args, **kwargs)
        return list(out) if isinstance(out, tuple) else out

    with torch.no_grad():
        embeds = eager_part("embed_prefill", ids)
        features = eager_part("vision", **media).to(embeds.dtype)
        if features.numel() != int(placeholders.sum()) * embeds.shape[-1]:
            raise Finding("contract", f"vision part gives {tuple(features.shape)} features for "
                                      f"{int(placeholders.sum())} placeholders")
        embeds = embeds.masked_scatter(placeholders.unsqueeze(-1), features)
        logits, *state = eager_part("prefill", embeds, **text)
        logits_list, tokens = [logits.float()], [logits.argmax(-1, keepdim=True)]
        for _ in range(NEW_TOKENS - 1):
            logits, *state = eager_part("step", eager_part("embed_step", tokens[-1]), list(state))
            logits_list.append(logits.float())
            tokens.append(logits.argmax(-1, keepdim=True))
    logits = logits_list
    parts_logits = logits

    def worst(a, b):
        return max(float((x.float() - y.float()).abs().max()) for x, y in zip(a, b))

    parts_diff, decomposition = worst(onnx_logits, parts_logits), worst(parts_logits, expected_logits)
    for step, (actual, wanted) in enumerate(zip(onnx_logits, expected_logits)):
        within, beyond = close(actual, wanted, ATOL, RTOL)
        if not within:
            raise Finding("contract", f"step {step}: ONNX Runtime logits differ from eager generate by "
                                      f"{beyond} (ONNX vs the same parts run eagerly: {parts_diff:.3g}; "
                                      f"eager parts vs eager generate: {decomposition:.3g})")
        if not torch.equal(onnx_tokens[:, step], expected_tokens[:, step]):
            raise Finding("contract", f"tokens from the ONNX parts differ from eager generate at new token "
                                      f"{step}: {onnx_tokens[0].tolist()} vs {expected_tokens[0].tolist()}")


# --- reporting: the failure's fingerprint by the suite's rules ---

import ast
import contextlib
import functools
import json
import re
import sys
import traceback
from pathlib import Path

RESULT = "REPRO-RESULT"
DATA_DEPENDENT = ("Could not guard on data-dependent", "data-dependent expression", "GuardOnDataDependentSymNode",
                  "DataDependentOutputException", "PendingUnbackedSymbolNotFound")
TRANSFORMERS_FILE = re.compile(r'File "([^"]*/transformers/[^"]+)", line (\d+)')
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*(?:e[-+]?\d+)?|\.\d+)(?![\w.])", re.IGNORECASE)
SHAPE = re.compile(r"\((?:\s*[-\w]+\s*,)+\s*[-\w]*\s*\)|\[(?:\s*[-\w]+\s*,)+\s*[-\w]*\s*\]")
BACKEND_PARTS = ("/torch/_inductor/", "/torch/_functorch/")
GENERATED_MARKERS = ("torchinductor_", "<inductor", "codegen(")
WRAPPERS = ("BackendCompilerFailed", "InductorError")


class Finding(AssertionError):
    """The check's own statement about the model: its `kind`, the words its fingerprint keeps (`what`, masked;
    default the message), a failed `guard`, the exception behind it (`cause`: its site and type), and the site the
    check names where no exception has one (`where`: the function that decided, as ``module:qualname``)."""

    def __init__(self, kind, message, what=None, guard="", cause=None, where=""):
        super().__init__(message)
        self.kind, self.what, self.guard, self.cause = kind, message if what is None else what, guard, cause
        self.where = where


@contextlib.contextmanager
def failing_as(default, unsupported="", backend=""):
    """A failure raised inside is of kind `default` unless its words say otherwise (`kind_of`); `unsupported`
    renames an unsupported construct (a compile says graph_break); under a code-generating `backend` a failure
    raised inside it is the backend's (kind backend)."""
    try:
        yield
    except Exception as exc:
        if not hasattr(exc, "repro_as"):
            exc.repro_as = (default, unsupported, backend)
        raise


def mask(text):
    """`text` with numbers and shapes replaced by ``#`` (the suite's `fingerprints.mask`)."""
    return " ".join(NUMBER.sub("#", SHAPE.sub("#", text)).split())


def module_of(filename):
    path = str(Path(filename))
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in path:
            path = path.rsplit(marker, 1)[1]
            break
    else:
        roots = sorted((str(Path(p).resolve()) for p in sys.path if p), key=len, reverse=True)
        path = next((path[len(root) + 1:] for root in roots if path.startswith(root + "/")), Path(path).name)
    return re.sub(r"\.py$", "", path).replace("/", ".").removesuffix(".__init__")


@functools.lru_cache(maxsize=256)
def _definitions(filename):
    try:
        tree = ast.parse(Path(filename).read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return ()
    found = []

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                found.append((child.lineno, child.end_lineno or child.lineno, name))
                walk(child, name + ("." if isinstance(child, ast.ClassDef) else ".<locals>."))
            else:
                walk(child, prefix)

    walk(tree, "")
    return tuple(found)


def site(filename, lineno, function=""):
    """``module:qualname`` of the innermost def or class around `lineno` of `filename`."""
    inside = [name for first, last, name in _definitions(filename) if lineno and first <= lineno <= last]
    name = inside[-1] if inside else (function if function and function != "<module>" else "<module>")
    return f"{module_of(filename)}:{name}"


def site_of(frames):
    frames = list(frames or [])
    if not frames:
        return ""
    frame = ([f for f in frames if "/transformers/" in f.filename] or frames)[-1]
    return site(frame.filename, frame.lineno, frame.name)


def where_of(exc):
    named = TRANSFORMERS_FILE.findall(str(exc))
    if named:
        return site(named[-1][0], int(named[-1][1]))
    stack = getattr(exc, "real_stack", None)
    return site_of(stack) if stack else site_of(traceback.extract_tb(exc.__traceback__))


def kind_of(exc, default="exception"):
    text = f"{type(exc).__name__}: {exc}"
    if any(marker in text for marker in DATA_DEPENDENT):
        return "data_dependent_guard"
    return "unsupported" if type(exc).__name__ == "Unsupported" else default


def guard_site(reason):
    """``<masked guard> @ <module:qualname>`` of one of dynamo's guard-failure reasons."""
    head = next((line.strip() for line in reason.splitlines() if line.strip()), "")
    head = head.split(": ", 1)[1] if re.match(r"^\S+/\S+: ", head) else head
    segments = [part.strip() for part in head.split("  # ")]
    located = next((re.search(r"(\S+\.py):(\d+) in (\w+)", part) for part in segments[1:]
                    if re.search(r"\S+\.py:\d+ in ", part)), None)
    where = site(located.group(1), int(located.group(2)), located.group(3)) if located else "?"
    return f"{mask(segments[0])} @ {where}"


def _chain(exc):
    seen = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = getattr(exc, "inner_exception", None) or exc.__cause__ or exc.__context__
    return seen


def _generated(filename):
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir
        root = cache_dir()
    except ImportError:
        root = ""
    return any(marker in filename for marker in GENERATED_MARKERS) or bool(root and filename.startswith(root))


def _backend_frames(exc):
    frames = [f for e in _chain(exc) for f in traceback.extract_tb(e.__traceback__)]
    return [f for f in frames if _generated(f.filename) or any(part in f.filename for part in BACKEND_PARTS)]


def backend_fingerprint(exc):
    """Kind backend: the innermost inductor/AOTAutograd frame (generated code as ``<inductor generated code>``),
    the exception the backend's wrapper was raised for, its first line masked."""
    chain = _chain(exc)
    inner = next((e for e in chain if type(e).__name__ not in WRAPPERS), chain[-1])
    frames = _backend_frames(exc)
    where = ""
    if frames:
        frame = frames[-1]
        where = (f"<inductor generated code>:{frame.name}" if _generated(frame.filename)
                 else site(frame.filename, frame.lineno, frame.name))
    message = " ".join((next((l.strip() for l in str(inner).splitlines() if l.strip()), "") or repr(inner)).split())
    message = message[:237] + "..." if len(message) > 240 else message
    return {"kind": "backend", "where": where, "error": type(inner).__name__, "what": mask(message)}


def fingerprint(exc):
    """The suite's fingerprint of a failure the script raised (see the module)."""
    if isinstance(exc, Finding):
        found = {"kind": exc.kind, "guard": guard_site(exc.guard) if exc.guard else "", "where": exc.where}
        if exc.cause is not None:
            found.update(where=where_of(exc.cause), error=type(exc.cause).__name__)
        elif exc.kind in ("contract", "numerical_mismatch"):
            found["what"] = mask(exc.what)
        return {k: v for k, v in found.items() if v}
    default, unsupported, backend = getattr(exc, "repro_as", ("exception", "", ""))
    if backend not in ("", "eager") and (any(type(e).__name__ in WRAPPERS for e in _chain(exc))
                                         or _backend_frames(exc)):
        return backend_fingerprint(exc)
    kind = kind_of(exc, default)
    if kind == "unsupported" and unsupported:
        kind = unsupported
    return {"kind": kind, "where": where_of(exc), "error": type(exc).__name__}


def main(reproduce):
    """Run `reproduce()`; print its fingerprint as the last ``REPRO-RESULT`` line; 1 when it raised, else 0."""
    try:
        reproduce()
    except Exception as exc:
        traceback.print_exc()
        found = {"raised": True, **fingerprint(exc),
                 "message": " ".join(str(exc).split())[:300]}
        print(f"{RESULT} {json.dumps(found, sort_keys=True)}", flush=True)
        return 1
    print("reproduce() returned: the failure did not happen here", file=sys.stderr)
    print(f"{RESULT} {json.dumps({'raised': False})}", flush=True)
    return 0


if __name__ == "__main__":
    print(f"torch {torch.__version__}, transformers {transformers.__version__}", file=sys.stderr)
    sys.exit(main(reproduce))
