"""Reproducer templates of the eager, compile and cache checks: build, compile_prefill, compile_dynamic,
compile_decode, static_cache, legacy_cache (`conformance.report.repro_templates.steps` states what a template is).

Each writes the check's own steps (its docstring in `conformance/checks/`) from the first call on the
model to the call that raises or the comparison that fails, with the check's inputs as literals and the
values the check derives from the model (which sub-module decodes, the cache argument's name, the prompt
length) written in as constants; the kinds of what it raises follow the check (an exception propagates, a failed comparison is an AssertionError with the check's words).
"""

from __future__ import annotations

import inspect
import re

import torch

from conformance.report.repro_templates.common import module_path, tolerance_constants
from conformance.report.repro_templates.steps import Context, NoTemplate, Steps



def build(ctx: Context) -> Steps:
    if ctx.sample is None:
        return Steps(["tiny_model()  # building the tiny model raises"], uses_sample=False)
    if re.search(r"does not change the (\w+ )?logits", ctx.cell.reason):  # "the bfloat16 logits" in a dtype run
        raise NoTemplate("the media check perturbs the sample's media with the suite's own generator")
    if ctx.kind not in ("numerical_mismatch", "contract"):  # the forward raises: nothing after it
        return Steps(["model = tiny_model()",
                      "with torch.no_grad():",
                      "    model(**sample_inputs())  # the eager prefill over the sample"])
    return Steps(["model = tiny_model()",
                  "with torch.no_grad():",
                  "    logits = logits_of(model(**sample_inputs()))  # the eager prefill over the sample",
                  "if not torch.isfinite(logits).all():",
                  '    raise AssertionError("eager prefill logits are not finite")'],
                 parts=("logits_of",))


COMPARED = ("numerical_mismatch", "contract", "call_order", "recompile")  # kinds decided after the call returns


def compile_prefill(ctx: Context) -> Steps:
    constants = {"BACKEND": repr(ctx.backend), **tolerance_constants(ctx, ctx.backend)}
    body = ["inputs = sample_inputs()"]
    if ctx.kind == "backend":
        body += ["with torch.no_grad():  # dynamo alone (backend eager) traces the same call fullgraph",
                 '    torch.compile(tiny_model(), fullgraph=True, backend="eager")(**inputs)',
                 "torch._dynamo.reset()"]
    if ctx.kind not in COMPARED:  # the compiled call raises: the comparison after it is left out
        return Steps(body + ["compiled = torch.compile(tiny_model(), fullgraph=True, backend=BACKEND)",
                             "with torch.no_grad():",
                             "    compiled(**inputs)  # compiled before any eager call on this instance"],
                     constants={"BACKEND": repr(ctx.backend)})
    body += ["model = tiny_model()",
             "compiled = torch.compile(model, fullgraph=True, backend=BACKEND)",
             "reference = tiny_model()  # a second instance, same weights",
             "with torch.no_grad():",
             "    expected = logits_of(reference(**inputs))"]
    if ctx.kind == "call_order":
        body += _call_order(ctx.fingerprint.get("cold") == "fail")
    else:
        body += ["with torch.no_grad():",
                 "    actual = logits_of(compiled(**inputs))  # compiled before any eager call on this instance",
                 "within, beyond = close(actual, expected, ATOL, RTOL)",
                 "if not within:",
                 '    raise AssertionError(f"compiled logits differ from eager by {beyond}")']
    return Steps(body, parts=("logits_of", "close"), constants=constants)


def _call_order(cold_fails: bool) -> list[str]:
    attempt = ["def attempt(module):",
               '    """The exception a compiled call raises, None when it runs."""',
               "    try:",
               f"        with torch.no_grad():",
               "            module(**inputs)",
               "    except Exception as exc:",
               "        return exc",
               "    return None",
               ""]
    if cold_fails:
        steps = ["cold = attempt(compiled)  # compiled before any eager call: fails",
                 "with torch.no_grad():  # the eager-called instance, traced once with graph breaks allowed",
                 '    torch.compile(reference, backend="eager")(**inputs)',
                 "torch._dynamo.reset()",
                 "warm = attempt(torch.compile(reference, fullgraph=True, backend=BACKEND))  # compiled after eager"]
    else:
        steps = ["cold = attempt(compiled)  # compiled before any eager call: runs",
                 "with torch.no_grad():",
                 "    model(**inputs)  # an eager call on the compiled instance",
                 "warm = attempt(compiled)  # the same compiled module again"]
    return attempt + steps + [
        "print(f\"compiled before any eager call: {cold or 'pass'}; after an eager call: {warm or 'pass'}\")",
        "if (cold is None) != (warm is None):  # the call order changes the verdict: the failing one, as raised",
        "    raise cold or warm"]


def compile_dynamic(ctx: Context) -> Steps:
    if ctx.kind == "specialisation":
        raise NoTemplate("a specialisation is named by the guard the shape environment logged while tracing "
                         "(the suite's ShapeLog), which the script does not replay")
    if ctx.kind not in ("graph_break", "data_dependent_guard", "exception", "unsupported"):
        raise NoTemplate(f"a {ctx.kind} of compile_dynamic needs the other prompt lengths (the suite's variants)")
    marked = ctx.metrics.get("marked")
    if not marked:
        raise NoTemplate("the run file records no marked dimensions for this cell")
    constants = {"BACKEND": repr(ctx.backend), "MARKED": repr({k: list(v) for k, v in marked.items()})}
    return Steps(["inputs = sample_inputs()",
                  "for name, dims in MARKED.items():  # the prompt axis of every sequence-aligned input",
                  "    for value in inputs[name] if isinstance(inputs[name], (list, tuple)) else [inputs[name]]:",
                  "        for dim in dims:",
                  "            torch._dynamo.mark_dynamic(value, dim)",
                  "model = tiny_model()",
                  "compiled = torch.compile(model, fullgraph=True, backend=BACKEND)",
                  f"with torch.no_grad():",
                  "    compiled(**inputs)  # before any eager call, the prompt length dynamic"], constants=constants)


def _decode_facts(ctx: Context) -> dict:
    """What compile_decode derives from an eager generate of the case: the decoding module, its cache argument,
    the prefill's length and batch, whether the tokens can be forced, and the inputs generate got."""
    from conformance.checks.common.cache import cache_kwarg, generate_inputs, greedy
    from conformance.checks.compile_decode import NEW_TOKENS, ForwardRecorder, _sequence_length

    model = ctx.case.fresh_model()
    inputs = generate_inputs(model, ctx.case.generate_inputs())
    recorder = ForwardRecorder(model)
    try:
        with torch.no_grad():
            eager = model.generate(**inputs, **greedy(NEW_TOKENS), return_dict_in_generate=True)
    except Exception as exc:  # the eager generate itself fails: the script shows that call
        return {"inputs": inputs, "eager_fails": exc}
    finally:
        recorder.remove()
    found = recorder.decoder()
    if found is None or not hasattr(eager, "sequences"):
        raise NoTemplate("the suite's compile_decode does not apply here without its recorded generate")
    decoder, calls = found
    facts = {"inputs": inputs, "new": NEW_TOKENS, "forced": not eager.sequences.is_floating_point(),
             "encoder_decoder": bool(getattr(model.config, "is_encoder_decoder", False))}
    if facts["encoder_decoder"]:  # generate's own static cache (cache_implementation="static")
        return facts
    first = next(v for k, v in calls[0].items() if k in ("input_ids", "inputs_embeds") and v is not None)
    return {**facts, "path": module_path(model, decoder), "kwarg": cache_kwarg(decoder),
            "length": _sequence_length(calls[0]), "batch": first.shape[0]}


def compile_decode(ctx: Context) -> Steps:
    if "forward without cache" in ctx.cell.reason:
        raise NoTemplate("the comparison with one forward without cache over the recorded generate inputs "
                         "is not written standalone")
    facts = _decode_facts(ctx)
    new = 5
    constants = {"BACKEND": repr(ctx.backend), **tolerance_constants(ctx, ctx.backend),
                 "NEW_TOKENS": repr(facts.get("new", new))}
    body = ["inputs = sample_inputs()",
            "eager = greedy(tiny_model(), inputs, NEW_TOKENS, output_logits=True, return_dict_in_generate=True)"]
    if "eager_fails" in facts:
        return Steps(body, parts=("greedy",), constants=constants, inputs=facts["inputs"],
                     notes=["eager greedy generate itself raises, before anything is compiled"])
    if facts["encoder_decoder"]:
        cache = 'cache_implementation="static"'
        body += ["model = tiny_model()"]
    else:
        cache = f"{facts['kwarg']}=cache"
        body += ["model = tiny_model()",
                 f"cache = static_cache(model{facts['path']}.config.get_text_config(decoder=True), "
                 f"{facts['length']} + NEW_TOKENS, {facts['batch']})  # what generate makes for a static cache"]
    if ctx.kind not in COMPARED:  # compiled generate raises (its prefill or first step): no eager run to follow
        body = ["inputs = sample_inputs()", *body[2:],
                "config = CompileConfig(fullgraph=True, backend=BACKEND, mode=None)",
                "config._compile_all_devices = True  # generate compiles on CUDA only unless told otherwise",
                "with torch.no_grad():",
                "    model.generate(**inputs, do_sample=False, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,",
                f"                   disable_compile=False, {cache}, compile_config=config)"]
        return Steps(body, parts=() if facts["encoder_decoder"] else ("static_cache",),
                     imports=("from transformers.generation.configuration_utils import CompileConfig",),
                     constants={"BACKEND": repr(ctx.backend), "NEW_TOKENS": constants["NEW_TOKENS"]},
                     inputs=facts["inputs"])
    forced = "[ForceTokens(eager.sequences[:, -NEW_TOKENS:])]" if facts["forced"] else "[]"
    body += ["config = CompileConfig(fullgraph=True, backend=BACKEND, mode=None)",
             "config._compile_all_devices = True  # generate compiles on CUDA only unless told otherwise",
             "torch._dynamo.reset()",
             "counters.clear()",
             "with torch.no_grad(), torch._dynamo.config.patch(recompile_limit=NEW_TOKENS + 1):  # count each recompile",
             "    compiled = model.generate(",
             "        **inputs, do_sample=False, num_beams=1, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,",
             f"        disable_compile=False, {cache}, compile_config=config, output_logits=True,",
             "        return_dict_in_generate=True,",
             f"        logits_processor=LogitsProcessorList({forced}))  # forced onto the eager tokens",
             'breaks = list(counters["graph_break"])',
             "if breaks:",
             '    raise AssertionError(f"the compiled decode step has {len(breaks)} graph break(s), first: "',
             "                                 f\"{breaks[0]}\")",
             'if not counters["stats"]["unique_graphs"]:',
             '    raise AssertionError("generate did not compile the decode step (its cache is not a "',
             '                  "compileable static cache, or the model\'s generate bypasses compilation)")',
             "failed = [str(reason) for reasons in guard_failures.values() for reason in reasons]",
             "if failed:",
             '    raise AssertionError("decode step recompiled after the first step; failed guard: " + failed[0])',
             "for step, (actual, expected) in enumerate(zip(compiled.logits, eager.logits)):",
             "    within, beyond = close(actual, expected, ATOL, RTOL)",
             "    if not within:",
             '        what = "prefill" if step == 0 else f"decode step {step}"',
             '        raise AssertionError(f"{what}: compiled static-cache logits differ from eager "',
             '                                  f"dynamic-cache decoding by {beyond}")']
    imports = ("from torch._dynamo.utils import counters, guard_failures",
               "from transformers import LogitsProcessorList",
               "from transformers.generation.configuration_utils import CompileConfig")
    return Steps(body, parts=("greedy", "close", "static_cache", "ForceTokens"), imports=imports,
                 constants=constants, inputs=facts["inputs"],
                 notes=["left out: the comparison of each step with one forward without cache (compile_decode's "
                        "second reference)"])


def static_cache(ctx: Context) -> Steps:
    from conformance.checks.common.cache import generate_inputs

    if ctx.kind == "contract" and "cache contents" in ctx.cell.reason:
        raise NoTemplate("the cache contents comparison reads every layer after each forward (the suite's hooks)")
    inputs = generate_inputs(ctx.case.fresh_model(), ctx.case.generate_inputs())
    witness = "float64 witness" in ctx.cell.reason
    body = ["inputs = sample_inputs()",
            "dynamic = greedy(tiny_model(), inputs, NEW_TOKENS, output_scores=True, return_dict_in_generate=True)",
            "static = greedy(tiny_model(), inputs, NEW_TOKENS, output_scores=True, return_dict_in_generate=True,",
            '                cache_implementation="static")',
            "first, worst = divergence(static, dynamic)",
            "for step in range(min(first + 1, len(dynamic.scores))):",
            "    within, beyond = close(static.scores[step], dynamic.scores[step], ATOL, RTOL)",
            "    if within:",
            "        continue",
            "    note = witness(inputs)" if witness else "    note = ''",
            "    if step < first:",
            '        raise AssertionError(f"static cache scores differ from the dynamic cache\'s at new token "',
            '                                  f"{step} by {beyond} while the tokens agree{note}")',
            "    new_static, new_dynamic = static.sequences[:, -NEW_TOKENS:], dynamic.sequences[:, -NEW_TOKENS:]",
            "    rows = (new_static[:, first] != new_dynamic[:, first]).nonzero().flatten().tolist()",
            '    raise AssertionError(f"static cache diverges from the dynamic cache at new token {first} (rows "',
            '                              f"{rows}: static {new_static[rows, first].tolist()} vs dynamic "',
            '                              f"{new_dynamic[rows, first].tolist()}); scores there differ by "',
            '                              f"{beyond}{note}")']
    helpers = ["def divergence(static, dynamic):",
               '    """(the first new token where any row differs, the worst score difference up to it)."""',
               "    steps = len(dynamic.scores)",
               "    differs = (static.sequences[:, -steps:] != dynamic.sequences[:, -steps:]).any(dim=0)",
               "    first = int(differs.nonzero()[0]) if differs.any() else steps",
               "    diffs = [scores_diff(static.scores[s], dynamic.scores[s]) for s in range(min(first + 1, steps))]",
               "    return first, max(diffs, default=0.0)",
               ""]
    if witness:
        helpers += ["def witness(inputs):",
                    '    """The same comparison in float64: near 0 says float32 rounding."""',
                    "    wide = {k: v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v",
                    "            for k, v in inputs.items()}",
                    "    try:",
                    "        dynamic = greedy(tiny_model().double(), wide, NEW_TOKENS, output_scores=True,",
                    "                         return_dict_in_generate=True)",
                    "        static = greedy(tiny_model().double(), wide, NEW_TOKENS, output_scores=True,",
                    '                        return_dict_in_generate=True, cache_implementation="static")',
                    "    except Exception:",
                    '        return ""',
                    '    return f" (float64 witness: {divergence(static, dynamic)[1]:.3g})"',
                    ""]
    constants = {"NEW_TOKENS": "10", **tolerance_constants(ctx, "eager")}
    return Steps(helpers + body, parts=("greedy", "close", "scores_diff"), constants=constants, inputs=inputs,
                 notes=["left out: the comparison of the cache contents layer by layer (static_cache's last step)"])


def _legacy_facts(ctx: Context) -> dict:
    from conformance.checks.common.cache import cache_kwarg, cache_owner
    from conformance.checks.legacy_cache import Decoder, owner_inputs, takes_generate_kwarg

    model = ctx.case.fresh_model().eval()
    owner, owner_name = cache_owner(model)
    decoder = Decoder(owner, owner_inputs(ctx.case.inputs(), owner_name))
    extra = {}
    if decoder.generation_code:
        params = inspect.signature(owner.prepare_inputs_for_generation).parameters
        if takes_generate_kwarg(params, "next_sequence_length"):
            extra["next_sequence_length"] = 1
        if takes_generate_kwarg(params, "is_first_iteration"):
            extra["is_first_iteration"] = False
    if decoder.generation_code and decoder.takes_cache_position:
        raise NoTemplate("transformers 4.x generation state (cache_position in the kwargs) is not written")
    return {"owner": "" if owner_name == "model" else ".language_model", "kwarg": cache_kwarg(owner),
            "inputs": decoder.prefill, "ids": decoder.ids_key, "mode": "encoder_decoder" if decoder.encoder_decoder
            else "generation" if decoder.generation_code else "plain", "extra": extra}


LEGACY_STEP = {
    "generation": ["    if state is None:",
                   "        state = {k: v for k, v in prefill.items() if k != IDS}",
                   "        state = owner._update_model_kwargs_for_generation(output, state, is_encoder_decoder=False)",
                   "    ids = torch.cat([ids, token], dim=1)",
                   "    kwargs = {k: v for k, v in state.items() if k not in ('cache', 'past_key_values')}",
                   "    inputs = dict(owner.prepare_inputs_for_generation(ids, **kwargs, **{CACHE: cache},",
                   "                                                      use_cache=True, **EXTRA))"],
    "encoder_decoder": ["    inputs = {k: v for k, v in prefill.items() if k not in (IDS, 'decoder_attention_mask')}",
                        "    inputs[IDS] = token"],
    "plain": ["    inputs = {IDS: token}",
              "    if 'attention_mask' in prefill:",
              "        mask = prefill['attention_mask']",
              "        inputs['attention_mask'] = torch.cat([mask, mask.new_ones((mask.shape[0], step + 1))], dim=1)"],
}


def legacy_cache(ctx: Context) -> Steps:
    facts = _legacy_facts(ctx)
    mode = facts["mode"]
    helpers = ["def decode(owner, prefill, output, cache):",
               '    """DECODE_STEPS steps after the prefill, feeding the last prompt tokens back, with the inputs',
               '    generate passes (its own prepare_inputs_for_generation where the model has one)."""',
               "    ids, state, logits = prefill[IDS], None, []" if mode == "generation" else "    logits = []",
               "    for step in range(DECODE_STEPS):",
               "        token = prefill[IDS][:, prefill[IDS].shape[1] - 1 - step:prefill[IDS].shape[1] - step]",
               *["    " + line for line in LEGACY_STEP[mode]],
               "        inputs[CACHE] = cache",
               "        inputs['use_cache'] = True",
               "        with torch.no_grad():",
               "            output = owner(**inputs)",
               "        logits.append(logits_of(output).detach().clone())",
               "        cache = cache_of(output)",
               *(["        state = owner._update_model_kwargs_for_generation(output, dict(state), "
                  "is_encoder_decoder=False)"] if mode == "generation" else []),
               "    return logits",
               ""]
    body = ["prefill = sample_inputs()",
            f"owner = tiny_model(){facts['owner']}  # the module whose forward takes the cache",
            "with torch.no_grad():",
            "    output = owner(**prefill, use_cache=True)",
            "cache = cache_of(output)",
            "legacy = to_legacy(cache)",
            "converted = from_legacy(cache, legacy)",
            "expected = decode(owner, prefill, output, cache)",
            "actual = decode(owner, prefill, output, converted)",
            "for step, (got, want) in enumerate(zip(actual, expected)):",
            "    within, beyond = close(got, want, ATOL, RTOL)",
            "    if not within:",
            '        what = f"decode step {step + 1} from {type(converted).__name__}"',
            '        what += ".from_legacy_cache" if hasattr(type(converted), "from_legacy_cache") else "(tuples)"',
            '        raise AssertionError(f"{what}: logits differ from eager by {beyond}")']
    constants = {"IDS": repr(facts["ids"]), "CACHE": repr(facts["kwarg"]), "DECODE_STEPS": "2",
                 "EXTRA": repr(facts["extra"]), **tolerance_constants(ctx, "eager")}
    if ctx.kind not in ("numerical_mismatch", "contract"):  # it raises: both decodings, no comparison
        body = body[:7] + ["decode(owner, prefill, output, converted)  # from the converted cache",
                           "decode(owner, prefill, output, cache)  # from the model's own cache"]
        constants = {k: v for k, v in constants.items() if k not in ("ATOL", "RTOL")}
    return Steps(helpers + body, parts=("logits_of", "close", "cache_of", "to_legacy", "from_legacy"),
                 constants=constants, inputs=facts["inputs"],
                 notes=["left out: what a raw legacy tuple passed to forward does (legacy_cache's last step)"])
