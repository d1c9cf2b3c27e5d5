"""Stage 4, report: one standalone reproducer script per upstream findings group.

Contracts:

* `repro_cell(group)` is the cell a group's script reproduces: its
  representative (`Group.representative`, the fastest cell) when a template
  writes that check (`conformance.report.repro_templates.template_for`), else
  the fastest cell whose check has one; None when none has.
* `build_context(group, cell, envelope)` rebuilds what the suite had for
  that cell: the class's tiny config (`build.tiny.tiny_config`), a model
  built from it with the suite's seed, and the sample (`build.samples`),
  without running the eager prefill the run checked (a class whose tiny
  model cannot be built still gets a context: its `build` script is that
  construction); `NoTemplate` when even the tiny config cannot be made.
* `render_script(ctx, steps)` is the script: a header (versions, the
  group's fingerprint, the classes and cells it covers, the diagnosis, what
  the inputs are and what the steps leave out), imports of torch and
  transformers only (onnxruntime for the ONNX checks), the tiny config as a
  literal dict rebuilt with the config class's ``from_dict``, the model
  built as the suite builds it (seed 0, all-zero weights woken), the inputs
  inline (`repro_values.Inputs`); a half-precision run's script casts both
  to its dtype (``DTYPE``, floating inputs only) and pastes that dtype's
  tolerances, a float32 run's is as it always was; the pieces of `repro_parts` its steps call,
  ``reproduce()``, and the reporting part (`repro_report`) whose last line
  is ``REPRO-RESULT {json}``. It never imports `conformance`; the generator
  compiles it (a syntax error is the generator's bug, reported as such).
* `write_repro(groups, envelopes, sources, folder)` writes ``<group id>.py``
  per upstream group it can, and `index.json` / `README.md` listing every
  upstream group: its script or why it has none (`Entry`). Verification
  (`conformance.report.repro_verify`) fills in whether each reproduces.
"""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from conformance.fingerprints import mask
from conformance.report import findings, repro_parts, repro_report
from conformance.columns import split as split_column
from conformance.report.repro_templates import template_for
from conformance.report.repro_templates.steps import Context, NoTemplate, Steps
from conformance.report.repro_values import Inputs, literal

INDEX = "index.json"
README = "README.md"
DROPPED_CONFIG_KEYS = ("transformers_version", "architectures", "_name_or_path")
CELL_CLASSES = 40  # classes whose cells the header lists


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
    observed: dict = field(default_factory=dict)  # the script's REPRO-RESULT
    links: list[list[str]] = field(default_factory=list)


def repro_cell(group: findings.Group):
    first = group.representative
    if template_for(split_column(first.check)[0]) is not None:
        return first
    ordered = sorted(group.cells, key=lambda c: (c.seconds, c.model, c.check))
    return next((c for c in ordered if template_for(split_column(c.check)[0]) is not None), None)


def build_context(group: findings.Group, cell, envelope: dict) -> Context:
    from conformance.cases.case import Case
    from conformance.cases.samples import make_sample
    from conformance.cases.tiny import new_model, tiny_config
    from conformance.discover import by_name, quiet_transformers

    check, column_backend = split_column(cell.check)
    backend = column_backend or envelope["environment"].get("backend", "eager")
    dtype = envelope["environment"].get("dtype", "float32")  # a run file that names none ran float32
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


def _import(cls: type) -> str:
    import transformers

    module = "transformers" if getattr(transformers, cls.__name__, None) is cls else cls.__module__
    return f"from {module} import {cls.__name__}"


def config_literal(config) -> tuple[str, list[str]]:
    """(the config's `to_dict()` as a literal, notes on fields the round trip through `from_dict` changes)."""
    data = config.to_dict()
    for key in DROPPED_CONFIG_KEYS:
        data.pop(key, None)
    again = type(config).from_dict(dict(data)).to_dict()
    changed = sorted(k for k in set(data) | set(again) if k not in DROPPED_CONFIG_KEYS and data.get(k) != again.get(k))
    notes = [f"the config's from_dict(to_dict()) round trip changes {', '.join(changed)}"] if changed else []
    try:
        return literal(data), notes
    except ValueError as exc:
        raise NoTemplate(f"the tiny config cannot be written as a literal: {exc}") from None


def diagnosis(group: findings.Group, cell) -> str:
    """One paragraph: what fails where, the exception, the guard or first graph-break site, the masked message."""
    fp = cell.fingerprint
    words = [f"{group.kind or 'a failure'} at `{group.where}` (site in {findings.site_in(group)})"]
    if fp.get("error"):
        words.append(f"raising {fp['error']}")
    if fp.get("guard"):
        words.append(f"failed guard `{fp['guard']}`")
    sites = group.sites()
    if sites:
        site, count = next(iter(sites.items()))
        words.append(f"{len(sites)} graph-break site(s), the most frequent `{site}` (x{count})")
    if fp.get("cold") or fp.get("warm"):
        words.append(f"compiled before any eager call: {fp.get('cold', '?')}, after one: {fp.get('warm', '?')}")
    return "; ".join(words) + f". The suite's message, masked: {mask(cell.reason)[:400]}"


def _comment(text: str, width: int = 114) -> list[str]:
    lines, line = [], "#"
    for word in text.split():
        if len(line) + len(word) + 1 > width and line != "#":
            lines.append(line)
            line = "#  "
        line += " " + word
    return lines + [line]


def _header(ctx: Context, steps: Steps, recipes: list[str], notes: list[str], envelope: dict) -> list[str]:
    group, cell, env = ctx.group, ctx.cell, envelope["environment"]
    fp = {k: v for k, v in cell.fingerprint.items() if k != "sites"}
    lines = [f"# Standalone reproducer of findings group {group.id}: {group.title()}", "#"]
    lines += _comment(f"Seen with transformers {env.get('transformers')}, torch {env.get('torch')}, "
                      f"{env.get('device')} / {env.get('dtype')} / backend {ctx.backend}. Needs only torch and "
                      "transformers (ONNX checks: onnxruntime too); no weights, no network.")
    lines += _comment(f"Fingerprint the suite recorded: {json.dumps(fp, sort_keys=True)}")
    lines += _comment(f"Covers {len(group.classes)} class(es), {len(group.cells)} cell(s): "
                      f"{', '.join(group.classes[:12])}{' ...' if len(group.classes) > 12 else ''}; checks: "
                      f"{', '.join(f'{c} ({n})' for c, n in group.checks.items())}.")
    by_class: dict[str, list[str]] = {}
    for c in sorted(group.cells, key=lambda c: (c.model, c.check)):
        by_class.setdefault(c.model, []).append(c.check)
    shown = list(by_class.items())[:CELL_CLASSES]
    lines += _comment("Cells: " + "; ".join(f"{name} ({', '.join(checks)})" for name, checks in shown)
                      + (f"; and {len(by_class) - CELL_CLASSES} more class(es)" if len(by_class) > CELL_CLASSES else "")
                      + ".")
    lines += _comment(f"This script: {cell.model} / {cell.check} (a tiny random {cell.model} from the config "
                      f"below, the inputs the check fed, the check's steps up to the failure).")
    lines += ["#"] + _comment("Diagnosis: " + diagnosis(group, cell)) + ["#"]
    if recipes:
        lines += _comment(f"Inputs: token ids and masks as recorded; {', '.join(recipes)} seeded random of the "
                          "recorded shapes (the suite's media are random too, the values differ).")
    for note in notes + steps.notes:
        lines += _comment(f"Note: {note}")
    lines += _comment("Run: python this_file.py. The last line it prints is REPRO-RESULT {json}: the failure's "
                      "fingerprint by the suite's rules (raised: false when nothing failed).")
    return lines


def _model_source(ctx: Context) -> list[str]:
    model = ctx.case.info.model_class.__name__
    config = type(ctx.case.tiny.config).__name__
    return ["def tiny_model():",
            f'    """A fresh tiny {model} with the suite\'s deterministic random weights (seed 0; weights left all',
            '    zero by the initialisation get small random values, so that every input path shows in the logits)."""',
            "    torch.manual_seed(0)",
            f"    model = {model}({config}.from_dict(CONFIG))",
            "    with torch.no_grad():",
            "        for name, param in model.named_parameters():",
            '            if param.is_floating_point() and not name.endswith("bias") and not param.any():',
            "                param.normal_(0.0, 0.02)",
            f"    return model{'' if _full_precision(ctx) else '.to(DTYPE)'}.eval()"]


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


def render_script(ctx: Context, steps: Steps, envelope: dict) -> str:
    """The script's source (see the module)."""
    config, notes = config_literal(ctx.case.tiny.config)
    writer = Inputs()
    inputs = steps.inputs if steps.inputs is not None else ctx.sample
    sample = []
    if steps.uses_sample:
        if inputs is None:
            raise NoTemplate("the sample inputs cannot be made for this class")
        try:
            block = writer.block(inputs)
        except ValueError as exc:
            raise NoTemplate(f"an input cannot be written: {exc}") from None
        sample = ["def sample_inputs():",
                  f'    """The inputs {ctx.check} fed (token ids literal, media seeded random: see the header)."""',
                  "    g = torch.Generator().manual_seed(0)",
                  "    return {", block, "    }"]
        if not _full_precision(ctx):
            sample = IN_DTYPE + ["", ""] + sample[:3] + ["    inputs = {", block, "    }",
                                                         "    return {k: in_dtype(v) for k, v in inputs.items()}"]
    plain = sorted({"import sys", *(repro_parts.IMPORTS if steps.parts else ()),
                    *(i for i in steps.imports if i.startswith("import "))})
    imports = [*plain, "", "import torch", "import transformers", _import(ctx.case.info.model_class),
               _import(type(ctx.case.tiny.config)), *(i for i in steps.imports if not i.startswith("import "))]
    report = inspect.getsource(repro_report)
    report = report.split('"""', 2)[2].lstrip("\n")
    body = ["def reproduce():", f'    """{ctx.check}: the steps up to the failure."""']
    body += [("    " + line).rstrip() for line in steps.body]
    parts = repro_parts.sources(steps.parts)
    source = "\n".join([
        *_header(ctx, steps, writer.recipes, notes, envelope), "", *imports, "",
        f"CONFIG = {config}", *([] if _full_precision(ctx) else [f"DTYPE = torch.{ctx.dtype}"]),
        *[f"{name} = {value}" for name, value in steps.constants.items()], "", "",
        *_model_source(ctx), "", "", *(sample + ["", ""] if sample else []),
        *(["# --- the check's pieces (vlm-conformance's rules, restated) ---", "", parts, "", ""] if parts else []),
        *body, "", "",
        "# --- reporting: the failure's fingerprint by the suite's rules ---", "", report.rstrip(), "", "",
        'if __name__ == "__main__":',
        '    print(f"torch {torch.__version__}, transformers {transformers.__version__}", file=sys.stderr)',
        "    sys.exit(main(reproduce))", ""])
    try:
        compile(source, f"{ctx.group.id}.py", "exec")
    except SyntaxError as exc:
        raise NoTemplate(f"the generator wrote invalid Python (a bug of vlm-conformance): {exc}") from None
    return source


def entry(group: findings.Group) -> Entry:
    from conformance.report.repro_links import upstream_links

    return Entry(group.id, group.title(), group.kind, group.where, findings.site_in(group), group.classes,
                 len(group.cells), list(group.checks), links=[list(link) for link in upstream_links(group.id)])


def write_one(group: findings.Group, envelopes: list[dict], folder: Path) -> Entry:
    """The group's script written into `folder` (its `Entry`), or the entry saying why there is none."""
    found = entry(group)
    cell = repro_cell(group)
    if cell is None:
        found.why = f"no reproducer template for {', '.join(group.checks)}"
        return found
    found.model, found.check = cell.model, cell.check
    try:
        ctx = build_context(group, cell, envelopes[cell.run])
        steps = template_for(ctx.check)(ctx)
        source = render_script(ctx, steps, envelopes[cell.run])
    except NoTemplate as exc:
        found.why = str(exc)
        return found
    except Exception as exc:  # the suite could not rebuild what the cell had: say so, write the others
        found.why = f"the generator failed on this cell: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        return found
    finally:
        torch._dynamo.reset()
    found.script = f"{group.id}.py"
    found.notes = list(steps.notes)
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
    (folder / README).write_text(render_readme(entries, sources, envs))


def _verdict(e: Entry) -> str:
    if not e.script:
        return "no script"
    if e.verified is None:
        return "not verified"
    return "yes" if e.verified else "no"


def render_readme(entries: list[Entry], sources: list[str], envs: list[dict]) -> str:
    written = [e for e in entries if e.script]
    checked = [e for e in written if e.verified is not None]
    ok = [e for e in checked if e.verified]
    seen = "; ".join(f"transformers {e.get('transformers')}, torch {e.get('torch')}" for e in envs)
    lines = ["# Standalone reproducers of the upstream findings", "",
             f"From {', '.join(f'`{s}`' for s in sources)} ({seen}). One script per root-cause group "
             "(`conformance findings RUN.json --repro DIR`): it needs only torch and transformers, builds the tiny "
             "model from a config written into it, makes the inputs inline and runs the check's steps up to the "
             "failure; its last line is `REPRO-RESULT {json}` (the failure's fingerprint by the suite's rules).", "",
             f"**{len(ok)} of {len(entries)} upstream groups reproduce standalone** (verified: run in a fresh "
             "interpreter without the suite importable, same fingerprint kind, exception type and site as the "
             f"group); {len(written)} have a script, {len(checked)} were verified, "
             f"{len(checked) - len(ok)} do not reproduce, {len(entries) - len(written)} have no script.", "",
             "| group | classes | cells | script | verified | why not / notes |",
             "| --- | ---: | ---: | --- | --- | --- |"]
    for e in entries:
        classes = ", ".join(e.classes[:3]) + (f" +{len(e.classes) - 3}" if len(e.classes) > 3 else "")
        script = f"[`{e.script}`]({e.script}) ({e.model} / `{e.check}`)" if e.script else "—"
        why = " ".join(e.why.split()).replace("|", "\\|")[:300]
        links = " ".join(f"[{title}]({url})" for url, title in e.links)
        lines.append(f"| `{e.group}` {e.kind} at "
                     f"`{re.sub(r'[|`]', ' ', e.where)[:90]}` | {classes} | {e.cells} | {script} | {_verdict(e)} | "
                     f"{why}{(' ' + links) if links else ''} |")
    seconds = sorted(e.seconds for e in checked if e.seconds is not None)
    if seconds:
        lines += ["", f"Verification: {len(seconds)} script(s), median {seconds[len(seconds) // 2]:.1f} s, "
                      f"max {seconds[-1]:.1f} s each (a fresh interpreter: importing torch and transformers included)."]
    return "\n".join(lines) + "\n"
