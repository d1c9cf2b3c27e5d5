"""Stage 4, report: one standalone reproducer script per upstream findings group.

Contracts:

* `repro_cells(group)` are the cells a group's script may reproduce, one per
  template (`conformance.report.repro_templates.template_for`) that covers one
  of its checks, in the order `write_one` tries them: the representative's
  (`Group.representative`, the fastest cell) first, then the fastest cell of
  each other; `repro_cell(group)` is the first, None when no check has one. A
  template that cannot write its cell (`NoTemplate`) hands on to the next, so
  a new template never takes away a group's script; the index keeps the first
  one's reason when none writes one.
* `build_context(group, cell, envelope)` rebuilds what the suite had for
  that cell: the class's tiny config (`build.tiny.tiny_config`), a model
  built from it with the suite's seed, and the sample (`build.samples`),
  without running the eager prefill the run checked (a class whose tiny
  model cannot be built still gets a context: its `build` script is that
  construction); `NoTemplate` when even the tiny config cannot be made.
* `render_script(ctx, steps, envelope)` is (the script, why its config is written in full: "" when it is not):
  a 5-10 line docstring (`header`: the group's symptom and site, the versions it was seen with, the command,
  the suite's reason unmasked, how many classes and cells share the root cause), imports of torch and
  transformers only (onnxruntime for the ONNX checks), ``CONFIG`` as the constructor call of only the fields
  that differ from the config classes' defaults (`repro_config.config_source`, checked equal when written; the
  full dict where it is not), the model built as the suite builds it (seed 0; for a failure decided by values,
  `COMPARED`, the all-zero weights woken; a failure that raises does not depend on them), the inputs inline
  (`repro_values.Inputs`; a module-level ``inputs`` dict when the steps take them once), the pieces of `repro_parts` its steps call, then the steps at module
  level: the failing call, its error propagating as raised, or the failed comparison as an AssertionError with
  the check's words and numbers. A half-precision run's script casts both to its dtype (``DTYPE``, floating
  inputs only). No fingerprint code, no import of `conformance`: verification judges the printed traceback
  from outside (`repro_verify`). Unused imports and constants are pruned and long lines wrapped
  (`repro_source`); the generator compiles it (a syntax error is the generator's bug, reported as such).
* `write_repro(groups, envelopes, sources, folder)` writes ``<group id>.py``
  per upstream group it can, and `index.json` / `README.md` listing every
  upstream group: its script or why it has none (`Entry`), and its issue text where ``issues/<id>.md`` is
  there (`conformance findings --issue top`). Verification
  (`conformance.report.repro_verify`) fills in whether each reproduces.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from conformance.report import findings, repro_parts, repro_source
from conformance.report.repro_config import config_source
from conformance.columns import split as split_column
from conformance.report.repro_templates import template_for
from conformance.report.repro_templates.steps import Context, NoTemplate, Steps
from conformance.report.repro_values import Inputs
from conformance.report.reproduce import column_dtype

INDEX = "index.json"
README = "README.md"
ISSUES = "issues"  # the issue texts of `conformance findings --issue top --repro DIR`, one per group


@dataclass
class Entry:
    """One upstream group in the reproducer index."""

    group: str
    title: str
    kind: str
    where: str
    site_in: str
    classes: list[str]
    cells: int
    checks: list[str]
    model: str = ""  # the cell the script reproduces
    check: str = ""
    script: str = ""  # file name in the folder, "" when none was written
    why: str = ""  # why no script, or (after verification) why it does not reproduce
    notes: list[str] = field(default_factory=list)
    verified: bool | None = None  # None: not run
    seconds: float | None = None
    observed: dict = field(default_factory=dict)  # the fingerprint verification read off the script's traceback
    links: list[list[str]] = field(default_factory=list)


def repro_cells(group: findings.Group) -> list:
    """One cell per template that can write the group's cells, in the order to try them: the representative's
    first, then by the fastest cell of each."""
    ordered = [group.representative] + sorted(group.cells, key=lambda c: (c.seconds, c.model, c.check))
    chosen: dict = {}
    for cell in ordered:
        template = template_for(split_column(cell.check)[0])
        if template is not None and template not in chosen:
            chosen[template] = cell
    return list(chosen.values())


def repro_cell(group: findings.Group):
    cells = repro_cells(group)
    return cells[0] if cells else None


def build_context(group: findings.Group, cell, envelope: dict) -> Context:
    from conformance.cases.case import Case
    from conformance.cases.samples import make_sample
    from conformance.cases.tiny import new_model, tiny_config
    from conformance.discover import by_name, quiet_transformers

    check, column_backend = split_column(cell.check)
    backend = column_backend or envelope["environment"].get("backend", "eager")
    dtype = column_dtype(cell.check, envelope["environment"].get("dtype", "float32"))  # none named: float32
    recorded = envelope["models"][cell.model]["cells"][cell.check]
    info = by_name().get(cell.model)
    if info is None:
        raise NoTemplate(f"{cell.model} is not a class of the installed transformers")
    try:
        with quiet_transformers():
            tiny = tiny_config(info)
    except Exception as exc:
        raise NoTemplate(f"the tiny config cannot be made here: {type(exc).__name__}: {exc}") from None
    case, sample = None, None
    try:
        with torch.no_grad(), quiet_transformers():
            model = new_model(tiny)
            made = make_sample(tiny, model)
        case = Case(info=info, tiny=tiny, sample=made)
        sample = case.inputs()
    except Exception:  # the model (or its inputs) cannot be made: a `build` script shows the construction
        case = Case(info=info, tiny=tiny, sample=None) if sample is None else case
    return Context(group, cell, recorded, case, check, backend, dtype, sample)


def _from_imports(classes: list[type]) -> list[str]:
    """``from <module> import A, B`` per module (transformers' top level where it exports the class)."""
    import transformers

    by_module: dict[str, set[str]] = {}
    for cls in classes:
        module = "transformers" if getattr(transformers, cls.__name__, None) is cls else cls.__module__
        by_module.setdefault(module, set()).add(cls.__name__)
    lines = [f"from {module} import {', '.join(sorted(names))}" for module, names in sorted(by_module.items())]
    return [line if len(line) <= 116 else line.replace(" import ", " import (", 1) + ")" for line in lines]


def header(ctx: Context, steps: Steps, envelope: dict, fallback: str = "") -> list[str]:
    """The script's docstring, 5-10 lines: what it shows (the group's symptom and site, the error unmasked), the
    versions it was seen with, the command, how many classes and cells share the root cause."""
    group, cell, env = ctx.group, ctx.cell, envelope["environment"]
    backend = f", backend {ctx.backend}" if ctx.backend != "eager" else ""
    needs = "; needs onnxruntime too" if "OrtProgram" in repro_parts.closure(steps.parts) else ""
    error = " ".join(cell.reason.split())
    error = error[:ERROR_CHARS - 3] + "..." if len(error) > ERROR_CHARS else error
    lines = _wrapped(f"{_symptom(group, ctx.check)}: {cell.model} ({ctx.check}{backend}).")[:2] + [""]
    lines += _wrapped(f"Seen with transformers {env.get('transformers')}, torch {env.get('torch')} "
                      f"({env.get('device')}, {ctx.dtype}){needs}. Run: python {group.id}.py")[:2]
    said = _wrapped(f"The suite saw: {error}")
    lines += said if len(said) <= 2 else [said[0], said[1][:110] + " ..."]
    lines += _wrapped(f"Shared by {len(group.classes)} class(es), {len(group.cells)} cell(s) of "
                      f"{len(group.checks)} check(s) (index.json lists them)."
                      + (f" Config written in full: {fallback}." if fallback else ""))[:2]
    return ['"""' + lines[0], *lines[1:], '"""']


def _symptom(group: findings.Group, check: str) -> str:
    """What the script shows, in words: ``[torch.export] data-dependent guard at <module:qualname>``."""
    from conformance.report.repro_issue import SYMPTOMS, stage

    if group.by_reason:
        return group.title()
    where = f" at {group.where}" if group.where else ""
    return f"[{stage(check)}] {SYMPTOMS.get(group.kind, group.kind)}{where}"


ERROR_CHARS = 220  # characters of the suite's reason the header quotes
DOC_QUOTES = '"' * 3


def _wrapped(text: str, width: int = 116) -> list[str]:
    import textwrap

    return textwrap.wrap(text.replace("\\", "/").replace(DOC_QUOTES, "'''"), width) or [""]


TINY_MODEL = ["def tiny_model():",
              '    """A fresh tiny model as the suite builds it: seed 0, weights left all zero get small random values."""',
              "    torch.manual_seed(0)",
              "    model = {model}(CONFIG)",
              "    with torch.no_grad():",
              "        for name, param in model.named_parameters():",
              '            if param.is_floating_point() and not name.endswith("bias") and not param.any():',
              "                param.normal_(0.0, 0.02)",
              "    return model{cast}.eval()"]
# A failure that raises does not depend on the weights' values: the model as its constructor makes it.
PLAIN_MODEL = ["def tiny_model():", "    torch.manual_seed(0)", "    return {model}(CONFIG){cast}.eval()"]
COMPARED = ("numerical_mismatch", "contract", "recompile")  # kinds decided by values: the suite's weights kept


def _full_precision(ctx: Context) -> bool:
    """Whether the run was float32 (its scripts build as they always did) rather than a half-precision run."""
    return ctx.dtype == "float32"


IN_DTYPE = ["def in_dtype(value):",
            '    """Floating tensors cast to the run\'s dtype (DTYPE), as the suite cast the inputs it fed."""',
            "    if isinstance(value, torch.Tensor) and value.is_floating_point():",
            "        return value.to(DTYPE)",
            "    if isinstance(value, (list, tuple)):",
            "        return type(value)(in_dtype(v) for v in value)",
            "    return value"]


def _sample(ctx: Context, steps: Steps, writer: Inputs) -> list[str]:
    inputs = steps.inputs if steps.inputs is not None else ctx.sample
    if not steps.uses_sample:
        return []
    if inputs is None:
        raise NoTemplate("the sample inputs cannot be made for this class")
    try:
        block = writer.block(inputs)
    except ValueError as exc:
        raise NoTemplate(f"an input cannot be written: {exc}") from None
    media = f"; {', '.join(writer.recipes)} seeded random of the recorded shape" if writer.recipes else ""
    said = f"The inputs {ctx.check} fed: token ids literal{media}."
    doc = _wrap_doc(said)
    seed = ["    g = torch.Generator().manual_seed(0)"] if writer.recipes else []
    if _full_precision(ctx) and _inputs_once(steps) and not steps.requests:  # a module-level dict: called once
        block = "\n".join(line[4:] for line in block.splitlines())
        return [*(f"# {line}" for line in _wrapped(said, 114)),
                *(["g = torch.Generator().manual_seed(0)"] if seed else []), "inputs = {", block, "}", ""]
    requests = _requests(ctx, steps)
    if _full_precision(ctx):
        return ["def sample_inputs():", *doc, *seed, "    return {", block, "    }", "", "", *requests]
    return [*IN_DTYPE, "", "", "def sample_inputs():", *doc, *seed,
            "    inputs = {", block, "    }", "    return {k: in_dtype(v) for k, v in inputs.items()}", "", "", *requests]


def _requests(ctx: Context, steps: Steps) -> list[str]:
    """A ``<name>_inputs()`` function for each other request the steps serve (its floats drawn from seed 1)."""
    lines = []
    for name, inputs in steps.requests.items():
        writer = Inputs()
        try:
            block = writer.block(inputs)
        except ValueError as exc:
            raise NoTemplate(f"an input of the {name} request cannot be written: {exc}") from None
        seed = ["    g = torch.Generator().manual_seed(1)"] if writer.recipes else []
        doc = _wrap_doc(f"The {name} request {ctx.check} served too.")
        if _full_precision(ctx):
            lines += [f"def {name}_inputs():", *doc, *seed, "    return {", block, "    }", "", ""]
        else:
            lines += [f"def {name}_inputs():", *doc, *seed, "    inputs = {", block, "    }",
                      "    return {k: in_dtype(v) for k, v in inputs.items()}", "", ""]
    return lines


def _inputs_once(steps: Steps) -> bool:
    """Whether the steps take the inputs once, as their first line (``inputs = sample_inputs()``)."""
    return bool(steps.body) and steps.body[0].split("#")[0].strip() == "inputs = sample_inputs()" \
        and sum(line.count("sample_inputs()") for line in steps.body) == 1


def _wrap_doc(text: str) -> list[str]:
    """A function's docstring of `text`, on one line when it fits."""
    if len(text) + 10 <= 116:
        return [f"    {DOC_QUOTES}{text}{DOC_QUOTES}"]
    parts = _wrapped(text, 108)
    return [f"    {DOC_QUOTES}{parts[0]}", *(f"    {p}" for p in parts[1:]), f"    {DOC_QUOTES}"]


def render_script(ctx: Context, steps: Steps, envelope: dict) -> tuple[str, str]:
    """(the script's source, why its config is written in full: "" when it is the diff) (see the module)."""
    config, classes, fallback = config_source(ctx.case.tiny.config, lead=len("CONFIG = "))
    writer = Inputs()
    sample = _sample(ctx, steps, writer)
    model_class = ctx.case.info.model_class
    plain = sorted({*repro_parts.IMPORTS, *(i for i in steps.imports if i.startswith("import "))})
    imports = [*plain, "", "import torch", *_from_imports([model_class, *classes]),
               *(i for i in steps.imports if not i.startswith("import "))]
    cast = "" if _full_precision(ctx) else ".to(DTYPE)"
    parts = repro_parts.sources(steps.parts)
    source = "\n".join([
        *header(ctx, steps, envelope, fallback), "", *imports, "",
        f"CONFIG = {config}", *([] if _full_precision(ctx) else [f"DTYPE = torch.{ctx.dtype}"]),
        *[f"{name} = {value}" for name, value in steps.constants.items()], "", "",
        *[line.format(model=model_class.__name__, cast=cast)
          for line in (TINY_MODEL if ctx.kind in COMPARED else PLAIN_MODEL)], "", "", *sample,
        *([parts, "", ""] if parts else []),
        *[line.rstrip() for line in (steps.body[1:] if sample and sample[0].startswith("# ") else steps.body)], ""])
    try:
        source = repro_source.wrap(repro_source.prune(source))
    except SyntaxError as exc:
        raise NoTemplate(f"the generator wrote invalid Python (a bug of vlm-conformance): {exc}") from None
    return repro_source.tidy(source), fallback


def entry(group: findings.Group) -> Entry:
    return Entry(group.id, group.title(), group.kind, group.where, findings.site_in(group), group.classes,
                 len(group.cells), list(group.checks), links=[list(link) for link in group.threads])


def write_one(group: findings.Group, envelopes: list[dict], folder: Path) -> Entry:
    """The group's script written into `folder` (its `Entry`), or the entry saying why there is none."""
    found = entry(group)
    cells = repro_cells(group)
    if not cells:
        found.why = f"no reproducer template for {', '.join(group.checks)}"
        return found
    for cell in cells:  # the first whose template writes it; the first one's reason when none does
        try:
            ctx = build_context(group, cell, envelopes[cell.run])
            steps = template_for(ctx.check)(ctx)
            source, fallback = render_script(ctx, steps, envelopes[cell.run])
            found.model, found.check = cell.model, cell.check
            break
        except NoTemplate as exc:
            why = str(exc)
        except Exception as exc:  # the suite could not rebuild what the cell had: say so, write the others
            why = f"the generator failed on this cell: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        finally:
            torch._dynamo.reset()
        if cell is cells[0]:
            found.model, found.check, found.why = cell.model, cell.check, why
    else:
        return found
    found.why = ""
    found.script = f"{group.id}.py"
    found.notes = list(steps.notes) + ([f"config written in full: {fallback}"] if fallback else [])
    (folder / found.script).write_text(source)
    return found


def write_repro(groups: list[findings.Group], envelopes: list[dict], sources: list[str], folder: Path,
                only: str = "", progress=None) -> list[Entry]:
    """A script per upstream group (or the one `only` names) into `folder`, then its index (see the module)."""
    folder.mkdir(parents=True, exist_ok=True)
    chosen = [g for g in groups if g.upstream and (not only or g.id == only)]
    entries = []
    for group in chosen:
        entries.append(write_one(group, envelopes, folder))
        if progress:
            progress(entries[-1])
    write_index(entries, folder, sources, envelopes)
    return entries


INSTALLED = re.compile(r"""(?:/[^\s"'`:]+)?/(?:site|dist)-packages/""")  # a machine's install prefix
TEMPORARY = re.compile(r"""/tmp/[^\s/"'`]+""")  # a temporary folder of the run


def portable(text: str) -> str:
    """`text` without the paths of the machine that ran the scripts (an install prefix, a temporary folder)."""
    return TEMPORARY.sub("<tmp>", INSTALLED.sub("", text))


def write_index(entries: list[Entry], folder: Path, sources: list[str], envelopes: list[dict]) -> None:
    """`index.json` (the entries as data, machine paths removed: `portable`) and `README.md` (the table a person
    reads)."""
    envs = [e["environment"] for e in envelopes]
    groups = [asdict(e) for e in entries]
    for group in groups:
        group["why"] = portable(group["why"])
        group["observed"] = {k: portable(v) if isinstance(v, str) else v for k, v in group["observed"].items()}
    data = {"sources": sources, "environments": [{k: e.get(k) for k in ("transformers", "torch", "device", "dtype",
                                                                        "backend")} for e in envs],
            "groups": groups}
    (folder / INDEX).write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    issues = {path.stem for path in (folder / ISSUES).glob("*.md")}
    (folder / README).write_text(render_readme(entries, sources, envs, issues))


def _verdict(e: Entry) -> str:
    if not e.script:
        return "no script"
    if e.verified is None:
        return "not verified"
    return "yes" if e.verified else "no"


def render_readme(entries: list[Entry], sources: list[str], envs: list[dict], issues: set[str] = frozenset()) -> str:
    written = [e for e in entries if e.script]
    checked = [e for e in written if e.verified is not None]
    ok = [e for e in checked if e.verified]
    seen = "; ".join(f"transformers {e.get('transformers')}, torch {e.get('torch')}" for e in envs)
    lines = ["# Standalone reproducers of the upstream findings", "",
             f"From {', '.join(f'`{s}`' for s in sources)} ({seen}). One script per root-cause group "
             "(`conformance findings RUN.json --repro DIR`): it needs only torch and transformers, builds the tiny "
             "model from the config fields that differ from the defaults, makes the inputs inline and runs the "
             "check's steps up to the failure, which it lets propagate as raised (or asserts the failing "
             "comparison). `--verify` judges each script's traceback from outside with the suite's fingerprint "
             "rules; `--issue ID` prints an issue text ready to paste.", "",
             f"**{len(ok)} of {len(entries)} upstream groups reproduce standalone** (verified: run in a fresh "
             "interpreter without the suite importable, its printed traceback judged by the suite's rules: same "
             f"kind, exception type and site as the group); {len(written)} have a script, {len(checked)} were verified, "
             f"{len(checked) - len(ok)} do not reproduce, {len(entries) - len(written)} have no script.", "",
             "| group | classes | cells | script | verified | why not / notes |",
             "| --- | ---: | ---: | --- | --- | --- |"]
    for e in entries:
        classes = ", ".join(e.classes[:3]) + (f" +{len(e.classes) - 3}" if len(e.classes) > 3 else "")
        script = f"[`{e.script}`]({e.script}) ({e.model} / `{e.check}`)" if e.script else "—"
        why = " ".join(e.why.split()).replace("|", "\\|")[:300]
        issue = [f"[issue text]({ISSUES}/{e.group}.md)"] if e.group in issues else []
        links = " ".join(issue + [f"[{title}]({url})" for url, title in e.links])
        lines.append(f"| `{e.group}` {e.kind} at "
                     f"`{re.sub(r'[|`]', ' ', e.where)[:90]}` | {classes} | {e.cells} | {script} | {_verdict(e)} | "
                     f"{why}{(' ' + links) if links else ''} |")
    seconds = sorted(e.seconds for e in checked if e.seconds is not None)
    if seconds:
        lines += ["", f"Verification: {len(seconds)} script(s), median {seconds[len(seconds) // 2]:.1f} s, "
                      f"max {seconds[-1]:.1f} s each (a fresh interpreter: importing torch and transformers included)."]
    return "\n".join(lines) + "\n"
