"""Reproducer templates of the export checks: export_forward(_strict), export_dynamic, export_static_cache,
export_generate, export_onnx, onnx_generate (`conformance.report.repro_templates.steps` states what a template is).

A failure at one export step (the fingerprint's `what` or the reason names the stage: ``torch.export.
export(strict=True)``, ``export of part vision``, ``onnxruntime session of part 'step'``) is written up to
that step; a failure after the programs exist (a call of a loaded program, a comparison) is written with
the whole check: the programs' run and the comparison the check makes, with its words.
"""

from __future__ import annotations

import re

import torch

from conformance.report.repro_templates.common import constants_source, forward_inputs, module_path, tolerance_constants
from conformance.report.repro_templates.steps import Context, NoTemplate, Steps
from conformance.report.repro_values import literal

TEXT_CONFIG = "config.get_text_config(decoder=True)"
PARTS = ("vision", "embed_prefill", "embed_step", "prefill", "step")


def _compare_loaded() -> list[str]:
    return ["with torch.no_grad():",
            "    module = loaded.module()",
            "    first, second = logits_of(module(**inputs)).clone(), logits_of(module(**inputs)).clone()",
            "with torch.no_grad():",
            "    expected = logits_of(tiny_model()(**inputs, **CONSTANTS))  # eager, another instance",
            'for what, actual in (("loaded program (first call)", first), ("loaded program (second call)", second)):',
            "    within, beyond = close(actual, expected, ATOL, RTOL)",
            "    if not within:",
            '        raise AssertionError(f"{what}: logits differ from eager by {beyond}")',
            "within, beyond = close(second, first, ATOL, RTOL)",
            "if not within:",
            '    raise AssertionError(f"the loaded program\'s second call differs from its first by {beyond}")']


def export_forward(ctx: Context) -> Steps:
    tensors, constants = forward_inputs(ctx)
    strict = ctx.check == "export_forward_strict"
    constants = {"CONSTANTS": constants_source(constants)}
    if ctx.cell.reason.startswith("torch.export.export(") and ctx.kind not in ("numerical_mismatch", "contract"):
        return Steps(["inputs = sample_inputs()",  # the export raises: its save, load and comparison left out
                      "with torch.no_grad():",
                      f"    torch.export.export(tiny_model(), (), kwargs=dict(inputs, **CONSTANTS), strict={strict})"],
                     inputs=tensors, constants=constants,
                     notes=["the model exported as is (the suite wraps it to return the logits)"])
    body = ["inputs = sample_inputs()",
            "model = tiny_model()",
            f"loaded = export_and_reload(LogitsModule(model, CONSTANTS), inputs, strict={strict})"]
    return Steps(body + _compare_loaded(), parts=("export_and_reload", "close", "logits_of"), inputs=tensors,
                 constants={**constants, **tolerance_constants(ctx, "export")})


def export_dynamic(ctx: Context) -> Steps:
    what = ctx.fingerprint.get("what", "")
    dims = re.findall(r"(\w+) dim (\d+)", what.split(" with ", 1)[-1]) if " with " in what else []
    if ctx.kind not in ("export_error", "data_dependent_guard") or not dims:
        raise NoTemplate(f"this {ctx.kind or 'failure'} of export_dynamic is decided over the suite's variants "
                         "(other prompts) and its shape log, not by one export")
    tensors, constants = forward_inputs(ctx)
    marked: dict[str, list[int]] = {}
    for name, dim in dims:
        marked.setdefault(name, []).append(int(dim))
    body = ["inputs = sample_inputs()",
            "shapes = {name: ({d: Dim.AUTO for d in DYNAMIC[name]} if name in DYNAMIC else None) for name in inputs}",
            "module = NamedLogitsModule(tiny_model(), list(inputs), CONSTANTS)",
            'with torch.no_grad():',
            "    torch.export.export(module, (), kwargs=inputs, dynamic_shapes=shapes, strict=False)"]
    return Steps(body, parts=("NamedLogitsModule",), imports=("from torch.export import Dim",), inputs=tensors,
                 constants={"CONSTANTS": constants_source(constants), "DYNAMIC": repr(marked)},
                 notes=["only the export with the dimensions the failing export marked Dim.AUTO (export_dynamic "
                        "retries with fewer; this is the export that failed)"])


def export_static_cache(ctx: Context) -> Steps:
    from conformance.checks.common.cache import cache_kwarg, cache_owner, generate_inputs
    from conformance.checks.common.export import split_inputs
    from conformance.checks.export_static_cache import DECODE_STEPS, SPARE_SLOTS, head_shapes
    from conformance.cases.configs import text_config

    reason = ctx.cell.reason
    decode = reason.startswith("decode program: ")
    if not (reason.startswith("torch.export.export(") or decode):
        raise NoTemplate("the failure comes after both programs exported (the runner's cache hand-over between "
                         "loaded programs and its comparisons are not written standalone)")
    model = ctx.case.fresh_model().eval()
    owner, _ = cache_owner(model)
    tensors, constants = split_inputs(generate_inputs(model, ctx.case.inputs()))
    mask = tensors.pop("attention_mask", None)
    ids = tensors["input_ids"]
    batch, length = ids.shape[:2]
    heads, head_dim = head_shapes(text_config(model.config))
    body = ["inputs = sample_inputs()",
            'mask2d = inputs.pop("attention_mask", None)',
            'mask2d = torch.ones_like(inputs["input_ids"]) if mask2d is None else mask2d',
            "",
            "def wrapper():",
            "    model = tiny_model()",
            f"    return StaticCacheModule(model, {cache_kwarg(owner)!r}, model.{TEXT_CONFIG}, CONSTANTS, {batch}, "
            "MAX_LEN, HEADS, HEAD_DIM)",
            "",
            f"prefill = dict(inputs, cache_position=torch.arange({length}), attention_mask=slot_mask(mask2d, MAX_LEN))",
            'with torch.no_grad():',
            "    torch.export.export(wrapper(), (), kwargs=prefill, strict=True)  # the prefill program"]
    if decode:
        body += [f'step = dict(input_ids=inputs["input_ids"][:, -1:], cache_position=torch.tensor([{length}]),',
                 "            attention_mask=slot_mask(mask2d, MAX_LEN))",
                 'with torch.no_grad():',
                 "    torch.export.export(wrapper(), (), kwargs=step, strict=True)  # the decode program"]
    tensors = dict(tensors, **({"attention_mask": mask} if mask is not None else {}))
    return Steps(body, parts=("StaticCacheModule", "slot_mask"), inputs=tensors,
                 constants={"CONSTANTS": constants_source(constants),
                            "MAX_LEN": repr(length + DECODE_STEPS + SPARE_SLOTS),
                            "HEADS": literal(heads), "HEAD_DIM": literal(head_dim)})


def generation_facts(ctx: Context) -> dict:
    """What export_generate derives from the model: the decoding and vision owners, media and text inputs,
    the placeholder id, the cache length and argument (batch 1: the sample's second prompt)."""
    from conformance.cases.configs import placeholder_id
    from conformance.checks.common.cache import cache_kwarg
    from conformance.checks.common.generation import ExportedGeneration, single_prompt
    from conformance.checks.common.outcome import NotApplicable

    served = re.match(r"served [^:]*?, not (\w+) \(([^)]*)\)", ctx.cell.reason)
    if served:
        raise NoTemplate(f"the failure is on the prompt {served.group(1)} ({served.group(2)}) that the check derives "
                         "from the sample; the template writes the sample's prompt, on which the parts agree")
    inputs = single_prompt(ctx.case.inputs())
    model = ctx.case.fresh_model()
    try:
        generation = ExportedGeneration(model, inputs)
    except NotApplicable as exc:
        raise NoTemplate(f"the check does not apply this way: {exc}") from None
    return {"inputs": inputs, "owner": module_path(model, generation.owner),
            "vision": module_path(model, generation.vision_model) if generation.vision_model is not None else None,
            "media": sorted(generation.media), "text": sorted(generation.text),
            "placeholder": placeholder_id(model.config), "max_len": generation.max_len,
            "kwarg": cache_kwarg(generation.owner)}


def _split(facts: dict) -> list[str]:
    placeholders = (f'inputs["input_ids"] == {facts["placeholder"]}' if facts["placeholder"] is not None
                    else 'torch.zeros_like(inputs["input_ids"], dtype=torch.bool)')
    return ["inputs = sample_inputs()  # batch 1: the sample's second prompt, its padding removed",
            "model = tiny_model()",
            f"owner = model{facts['owner']}  # the module generate decodes with",
            f"placeholders = {placeholders}",
            'ids = inputs["input_ids"].masked_fill(placeholders, 0)',
            f"media = {{k: inputs[k] for k in {facts['media']!r}}}",
            f"text = {{k: inputs[k] for k in {facts['text']!r}}}",
            "embedding = EmbedPart(owner.get_input_embeddings())",
            f"decoder = DecoderPart(owner, MAX_LEN, {facts['kwarg']!r}, owner.{TEXT_CONFIG})"]


# What a text part's export needs traced first, when it is exported alone (the part whose export fails).
ALONE = {"embed_prefill": [], "embed_step": [],
         "prefill": ["with torch.no_grad():", "    embeds = embedding(ids)"],
         "step": ["with torch.no_grad():", "    embeds = embedding(ids)", "    _, *state = decoder(embeds, **text)"]}


def _stage(ctx: Context, pattern: str) -> str:
    found = re.search(pattern, f"{ctx.fingerprint.get('what', '')} {ctx.cell.reason}")
    return found.group(1) if found else ""


def vision_first_lines(facts: dict) -> list[str]:
    """The lines up to the vision part, the first one exported: when its export fails, nothing after it runs."""
    return ["inputs = sample_inputs()  # batch 1: the sample's second prompt, its padding removed",
            "model = tiny_model()",
            f"media = {{k: inputs[k] for k in {facts['media']!r}}}"]


def export_generate(ctx: Context) -> Steps:
    facts = generation_facts(ctx)
    stage = _stage(ctx, r"export of part '?(\w+)")
    if stage == "vision" and facts["vision"] is not None:
        body = vision_first_lines(facts) + [f"export_part(VisionPart(model{facts['vision']}), kwargs=media)"]
        return _steps(ctx, body, facts, ("export_part", "VisionPart"))
    body = _split(facts) + ["programs = {}"]
    prefill_only = _prefill_decides(ctx)
    exports = [("vision", f"VisionPart(model{facts['vision']}), kwargs=media"),
               ("embed_prefill", "embedding, (ids,)"), ("embed_step", "embedding, (ids[:, -1:],)"),
               ("prefill", "decoder, (embeds,), dict(text)"), ("step", "decoder, (embeds[:, -1:], state)")]
    if stage in ALONE:
        body = _split(facts) + ALONE[stage] + [f"export_part({dict(exports)[stage]})"]
        steps = _steps(ctx, body, facts, ("export_part", "EmbedPart", "DecoderPart"))
        steps.notes.append(f"only the part whose export fails ({stage}); the check exports the parts before it first")
        return steps
    for name, call in exports:
        if (name == "vision" and facts["vision"] is None) or (prefill_only and name in ("embed_step", "step")):
            continue
        if name == "prefill":
            body += ["with torch.no_grad():", "    embeds = embedding(ids)"]
        if name == "step":
            body += ["with torch.no_grad():", "    _, *state = decoder(embeds, **text)"]
        body.append(f"programs[{name!r}] = export_part({call})")
        if name == stage:
            return _steps(ctx, body, facts, ("export_part", "EmbedPart", "DecoderPart", "VisionPart"))
    body += ["",
             "def run(name, *args, **kwargs):",
             "    return programs[name].module()(*args, **kwargs)",
             "",
             *_greedy_from("run", facts, decode=not prefill_only)]
    if ctx.kind not in ("numerical_mismatch", "contract"):  # a call raises: the calls, not the comparisons
        body += ["with torch.no_grad():",
                 "    reference = tiny_model()",
                 "    eager_generation(reference, inputs, NEW_TOKENS)",
                 "    reference(**inputs)  # a forward without cache"]
        return _steps(ctx, body, facts, ("export_part", "EmbedPart", "DecoderPart", "VisionPart",
                                         "eager_generation"), new_tokens=1 if prefill_only else 8)
    body += ["exported = torch.cat(tokens, dim=1)",
             "reference = tiny_model()",
             "expected, eager_logits = eager_generation(reference, inputs, NEW_TOKENS)",
             "with torch.no_grad():",
             "    plain = logits_of(reference(**inputs))[:, -1, :]",
             "if not torch.equal(exported, expected):",
             "    step = int((exported != expected).int().argmax())",
             '    raise AssertionError(f"tokens from the exported programs differ from eager generate at new "',
             '                              f"token {step}: {exported[0].tolist()} vs {expected[0].tolist()}")',
             "for step, (actual, wanted) in enumerate(zip(logits, eager_logits)):",
             "    within, beyond = close(actual, wanted, ATOL, RTOL)",
             "    if not within:",
             '        what = "prefill" if step == 0 else f"decode step {step}"',
             '        what += " of the exported programs vs eager generate"',
             '        raise AssertionError(f"{what}: logits differ from eager by {beyond}")',
             "within, beyond = close(logits[0], plain, ATOL, RTOL)",
             "if not within:",
             '    raise AssertionError(f"prefill of the exported programs vs a forward without cache: logits "',
             '                              f"differ by {beyond}")']
    return _steps(ctx, body, facts, ("export_part", "EmbedPart", "DecoderPart", "VisionPart", "eager_generation",
                                "close", "logits_of"), new_tokens=1 if prefill_only else 8)


def _greedy_from(run: str, facts: dict, functional: bool = False, decode: bool = True) -> list[str]:
    """Greedy decoding from parts called through `run` (the placeholder merge and the argmax are glue); without
    `decode` the prefill alone (one new token)."""
    step = (f'logits, *state = {run}("step", {run}("embed_step", tokens[-1]), list(state))' if functional
            else f'logits = {run}("step", {run}("embed_step", tokens[-1]), list(state))')
    merge = ([f'    features = {run}("vision", **media).to(embeds.dtype)',
              "    if features.numel() != int(placeholders.sum()) * embeds.shape[-1]:",
              '        raise AssertionError(f"vision part gives {tuple(features.shape)} features for "',
              '                                  f"{int(placeholders.sum())} placeholders")',
              "    embeds = embeds.masked_scatter(placeholders.unsqueeze(-1), features)"]
             if facts["vision"] is not None else [])
    return ["with torch.no_grad():",
            f'    embeds = {run}("embed_prefill", ids)',
            *merge,
            f'    logits, *state = {run}("prefill", embeds, **text)',
            "    logits_list, tokens = [logits.float()], [logits.argmax(-1, keepdim=True)]",
            *(["    for _ in range(NEW_TOKENS - 1):",
               f"        {step}",
               "        logits_list.append(logits.float())",
               "        tokens.append(logits.argmax(-1, keepdim=True))"] if decode else []),
            "logits = logits_list"]


def _prefill_decides(ctx: Context) -> bool:
    """Whether the cell's failure is already in the prefill (its logits, or a run of a part before the decoding
    steps): then the script generates one token, without the decoding loop and the step parts."""
    what, reason = ctx.fingerprint.get("what", ""), ctx.cell.reason
    return what == "prefill" or reason.startswith("prefill ") or bool(
        re.search(r"run of part '(vision|embed_prefill|prefill)'", reason))


def _against_generate(what: str) -> list[str]:
    """The check's comparison of the parts' greedy tokens and logits with eager generate, in its words."""
    return ["reference = tiny_model()",
            "expected, expected_logits = eager_generation(reference, inputs, NEW_TOKENS)",
            "exported = torch.cat(tokens, dim=1)",
            "if not torch.equal(exported, expected):",
            "    step = int((exported != expected).int().argmax())",
            f'    raise AssertionError(f"tokens from the {what} differ from eager generate at new token {{step}}: "',
            '                         f"{exported[0].tolist()} vs {expected[0].tolist()}")',
            "for step, (actual, wanted) in enumerate(zip(logits, expected_logits)):",
            "    within, beyond = close(actual, wanted.float(), ATOL, RTOL)",
            "    if not within:",
            '        step_name = "prefill" if step == 0 else f"decode step {step}"',
            f'        raise AssertionError(f"{{step_name}} of the {what} vs eager generate: logits differ by {{beyond}}")']


def _steps(ctx: Context, body: list[str], facts: dict, parts: tuple, new_tokens: int = 8, **more) -> Steps:
    constants = {"MAX_LEN": repr(facts["max_len"]), "NEW_TOKENS": repr(new_tokens),
                 **tolerance_constants(ctx, "export"), **more}
    return Steps(body, parts=parts, constants=constants, inputs=facts["inputs"])


def _exporter() -> str:
    from conformance.checks.common import onnx as _onnx

    return "transformers" if _onnx.exporter_name() == _onnx.TRANSFORMERS_EXPORTER else "torch"


def _onnx_export() -> str:
    """The piece that exports to ONNX as the check does: transformers' OnnxExporter, else torch.onnx's."""
    return "onnx_export" if _exporter() == "transformers" else "torch_onnx_export"


def export_onnx(ctx: Context) -> Steps:
    tensors, constants = forward_inputs(ctx)
    exporter = _exporter()
    # an encoder-decoder's logits are over the decoder positions: its own mask says which to compare
    mask_key = "decoder_attention_mask" if any(k.startswith("decoder_") for k in tensors) else "attention_mask"
    module = "model, {**inputs, **CONSTANTS}" if exporter == "transformers" else \
        "LogitsModule(model, CONSTANTS), dict(inputs)"
    body = ["inputs = sample_inputs()",
            "model = tiny_model()",
            "folder = tempfile.mkdtemp()",
            f'feed = {_onnx_export()}({module}, os.path.join(folder, "model.onnx"))',
            'program = OrtProgram(os.path.join(folder, "model.onnx"))',
            "outputs = program(feed)",
            'actual = outputs["logits"] if "logits" in outputs else next(iter(outputs.values()))',
            "with torch.no_grad():",
            "    expected = logits_of(tiny_model()(**inputs, **CONSTANTS))",
            f"mask = inputs.get({mask_key!r})",
            "if isinstance(mask, torch.Tensor) and mask.dim() == 2 and expected.shape[:2] == mask.shape:",
            "    actual, expected = actual[mask.bool()], expected[mask.bool()]  # every non-padding position",
            "within, beyond = close(actual, expected, ATOL, RTOL)",
            "if not within:",
            '    raise AssertionError(f"ONNX Runtime logits: logits differ from eager by {beyond}")']
    parts = (_onnx_export(), "OrtProgram", "close", "logits_of") + (("LogitsModule",) if exporter == "torch" else ())
    # a failure at one step (the reason names it) is written up to that step: no comparison after it
    last = {"export": 3, "onnxruntime session": 4, "onnxruntime run": 5}
    stage = next((name for name in last if ctx.cell.reason.startswith(name + " ") or
                  ctx.cell.reason.startswith(name + ":")), None)
    if stage and ctx.kind not in ("numerical_mismatch", "contract"):
        body = body[:last[stage] + 1]
        constants = {"CONSTANTS": constants_source(constants)}
        return Steps(body, parts=parts, imports=("import os", "import tempfile"), inputs=tensors, constants=constants)
    return Steps(body, parts=parts, imports=("import os", "import tempfile"), inputs=tensors,
                 constants={"CONSTANTS": constants_source(constants), **tolerance_constants(ctx, "export")})


def onnx_generate(ctx: Context) -> Steps:
    facts = generation_facts(ctx)
    stage = _stage(ctx, r"(?:export|onnxruntime session) of part '(\w+)'")
    if _stage(ctx, r"export of part '(\w+)'") == "vision" and facts["vision"] is not None:
        body = vision_first_lines(facts) + [
            "folder = tempfile.mkdtemp()",
            f'{_onnx_export()}(VisionPart(model{facts["vision"]}), dict(media), os.path.join(folder, "model.onnx"))']
        steps = _steps(ctx, body, facts, (_onnx_export(), "VisionPart"))
        steps.imports = ("import os", "import tempfile")
        return steps
    if ctx.kind == "data_dependent_guard" and not stage and not re.search(r"part '\w+'", ctx.cell.reason):
        return _left_by_export(ctx, facts)
    prefill_only = _prefill_decides(ctx)
    part_alone = ctx.kind == "numerical_mismatch" and prefill_only
    helper = ["sessions = {}",
              "",
              "def onnx_part(name, module, kwargs):",
              '    path = os.path.join(tempfile.mkdtemp(prefix=f"{name}-"), "model.onnx")',
              f"    {'feed = ' if part_alone else ''}{_onnx_export()}(module, kwargs, path)",
              "    sessions[name] = OrtProgram(path)",
              *(_PART_ALONE if part_alone else []),
              ""]
    vision = f"VisionPart(model{facts['vision']}), dict(media)"
    vision_first = part_alone and facts["vision"] is not None  # a cut after the vision part keeps no text line
    if vision_first:
        first = vision_first_lines(facts)[:2]  # the media inline: the text lines after it (the split's) define `media`
        media = f"{{k: inputs[k] for k in {facts['media']!r}}}"
        body = first + helper + [f"onnx_part('vision', VisionPart(model{facts['vision']}), {media})"] + \
            [s for s in _split(facts) if s not in first]
    else:
        body = _split(facts) + helper
    exports = [("vision", vision),
               ("embed_prefill", 'embedding, {"input_ids": ids}'),
               ("embed_step", 'embedding, {"input_ids": ids[:, -1:]}'),
               ("prefill", 'decoder, {"inputs_embeds": embeds, **text}'),
               ("step", f"FunctionalStep(owner, MAX_LEN, {facts['kwarg']!r}, owner.{TEXT_CONFIG}), "
                        '{"inputs_embeds": embeds[:, -1:], "cache_tensors": state}')]
    parts = (_onnx_export(), "OrtProgram", "EmbedPart", "DecoderPart", "VisionPart", "FunctionalStep", "leaf_feed")
    imports = ("import os", "import tempfile")
    if stage in ALONE:
        body += ALONE[stage] + [f"onnx_part({stage!r}, {dict(exports)[stage]})"]
        steps = _steps(ctx, body, facts, parts, new_tokens=4)
        steps.imports = imports
        steps.notes.append(f"only the part that fails ({stage}); the check exports the parts before it first")
        return steps
    for name, call in exports:
        if (name == "vision" and (facts["vision"] is None or vision_first)) or \
                (prefill_only and name in ("embed_step", "step")):
            continue
        if name == "prefill":
            body += ["with torch.no_grad():  # the decoder runs once the parts before it are exported",
                     "    embeds = embedding(ids)"]
            if not prefill_only and stage != "prefill":  # the step part is traced with the prefill's cache
                body.append("    _, *state = decoder(embeds, **text)")
        body.append(f"onnx_part({name!r}, {call})")
        if name == stage:
            steps = _steps(ctx, body, facts, parts, new_tokens=4)
            steps.imports = imports
            return steps
    body += ["POSITIONAL = {'embed_prefill': ('input_ids',), 'embed_step': ('input_ids',), "
             "'prefill': ('inputs_embeds',),",
             "              'step': ('inputs_embeds', 'cache_tensors')}",
             "",
             "def ort(name, *args, **kwargs):",
             "    named = dict(zip(POSITIONAL.get(name, ()), args), **kwargs)",
             "    outputs = list(sessions[name](leaf_feed(named)).values())",
             "    return outputs[0] if len(outputs) == 1 else outputs",
             "",
             *_greedy_from("ort", facts, functional=True, decode=not prefill_only)]
    if ctx.kind in ("numerical_mismatch", "contract"):
        body += _against_generate("exported parts")
    else:  # a call raises: the eager generation the check compares with, not the comparison
        body += ["with torch.no_grad():", "    eager_generation(tiny_model(), inputs, NEW_TOKENS)"]
    steps = _steps(ctx, body, facts, parts + ("eager_generation", "close"), new_tokens=1 if prefill_only else 4)
    if prefill_only:
        steps.notes.append("one new token: the prefill already fails (the check generates 4)")
    if part_alone:
        steps.notes.append("each part is also compared alone with the same module run eagerly, right after its "
                           "export: the first that differs is the one to read")
    steps.imports = imports
    return steps


# A prefill whose logits differ: each part, once exported, run in ONNX Runtime against the same module run eagerly on
# the same inputs (the check's own words: its parts run eagerly agree with generate), so the script stops at the part
# whose ONNX run differs and the verifier's cut drops the parts after it.
_PART_ALONE = [
    "    expected = module(**kwargs)  # the part alone: ONNX Runtime against the same module run eagerly",
    "    expected = expected[0] if isinstance(expected, tuple) else expected",
    "    within, beyond = close(next(iter(sessions[name](feed).values())), expected, ATOL, RTOL)",
    "    if not within:",
    '        raise AssertionError(f"prefill of the exported parts: part {name!r} in ONNX Runtime differs from the "',
    '                             f"same part run eagerly by {beyond}")']


def _left_by_export(ctx: Context, facts: dict) -> Steps:
    """A data-dependent error raised outside every export (the reason names no part): a fake tensor the export left
    in the model, met when the check runs the exported model's parts eagerly (its diagnostic, after the artifacts
    differ). Each prefill part is exported, then run eagerly on the exported model and on a fresh one."""
    owner, text = facts["owner"], f"owner.{TEXT_CONFIG}"
    body = ["inputs = sample_inputs()  # batch 1: the sample's second prompt, its padding removed",
            "model, fresh = tiny_model(), tiny_model()  # the same weights (seed 0); `fresh` is never exported",
            f"owner, fresh_owner = model{owner}, fresh{owner}  # the modules generate decodes with",
            *_split(facts)[3:7],
            "",
            "def export_then_run(name, part, fresh_part, kwargs):",
            '    """The part exported to ONNX, then run eagerly on the exported model and on a fresh one."""',
            f'    {_onnx_export()}(part, kwargs, os.path.join(tempfile.mkdtemp(prefix=f"{{name}}-"), "model.onnx"))',
            "    with torch.no_grad():",
            "        after, before = part(**kwargs), fresh_part(**kwargs)",
            "    after, before = (x[0] if isinstance(x, tuple) else x for x in (after, before))",
            "    if not torch.equal(after, before):  # a tensor the export left fake cannot be compared: raises",
            '        raise AssertionError(f"part {name!r} run eagerly after its export differs from a fresh model\'s")',
            ""]
    if facts["vision"] is not None:
        vision = facts["vision"]
        body.append(f"export_then_run('vision', VisionPart(model{vision}), VisionPart(fresh{vision}), dict(media))")
    body += ["export_then_run('embed_prefill', EmbedPart(owner.get_input_embeddings()), "
             'EmbedPart(fresh_owner.get_input_embeddings()), {"input_ids": ids})',
             "with torch.no_grad():",
             "    embeds = fresh_owner.get_input_embeddings()(ids)",
             f"export_then_run('prefill', DecoderPart(owner, MAX_LEN, {facts['kwarg']!r}, {text}), "
             f"DecoderPart(fresh_owner, MAX_LEN, {facts['kwarg']!r}, fresh_{text}), "
             '{"inputs_embeds": embeds, **text})']
    steps = _steps(ctx, body, facts, (_onnx_export(), "EmbedPart", "DecoderPart", "VisionPart"))
    steps.imports = ("import os", "import tempfile")
    steps.notes.append("the check runs the exported model's parts eagerly (its diagnostic when the ONNX parts differ "
                       "from eager generate): each part is exported, then run eagerly on that model and a fresh one")
    return steps
