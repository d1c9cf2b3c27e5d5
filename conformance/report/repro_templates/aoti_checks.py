"""Reproducer templates of aoti_forward and aoti_generate (`conformance.report.repro_templates.steps` states what a
template is).

The check's steps, each a line of the script: the export of `export_dynamic` (the prompt length ``Dim.AUTO`` where
the program kept it dynamic, the cell's ``dynamic`` metric), ``torch._inductor.aoti_compile_and_package``, then the
package loaded and called in a fresh interpreter that imports torch only (`repro_parts.serve_fresh`: a custom
operator defined in Python is not there, as in a C++ server). The script stops at the step the cell's reason names
(``export: ``, ``compile: ``, ``package: ``, ``load: ``, ``run: ``); a comparison (``compare: ``) or a failure on
another prompt length than the sample's is decided over the suite's variants, which a script does not restate.

aoti_generate: a failure of the vision part (exported static, as the check exports a part that keeps no dynamic
dimension) is written as that part alone through the same steps; the text parts' failures (their prompt length
dynamic, the cache carried between calls) and another request's are not written yet.
"""

from __future__ import annotations

import re

from conformance.report.repro_templates.common import constants_source, forward_inputs
from conformance.report.repro_templates.export_checks import generation_facts, vision_first_lines
from conformance.report.repro_templates.steps import Context, NoTemplate, Steps

STEPS = ("export", "compile", "package", "load", "run")


def aoti_forward(ctx: Context) -> Steps:
    step = ctx.cell.reason.split(":", 1)[0]
    if step not in STEPS:
        raise NoTemplate(f"the failure is at the step {step!r}: decided over the suite's prompt-length variants and "
                         "their comparison with eager, not by one call")
    if step == "run" and not re.match(r"run: call traced: ", ctx.cell.reason):
        raise NoTemplate("the package fails on another prompt length than the sample's, which the check derives")
    tensors, constants = forward_inputs(ctx)
    dynamic = {name: dims for name, dims in (ctx.metrics.get("dynamic") or {}).items() if name in tensors}
    body = ["inputs = sample_inputs()",
            "shapes = {name: ({d: Dim.AUTO for d in DYNAMIC[name]} if name in DYNAMIC else None) for name in inputs}",
            "module = NamedLogitsModule(tiny_model(), list(inputs), CONSTANTS)",
            "with torch.no_grad():",
            "    program = torch.export.export(module, (), kwargs=inputs, dynamic_shapes=shapes, strict=False)"]
    parts: tuple[str, ...] = ("NamedLogitsModule",)
    if step != "export":
        body += ['package = os.path.join(tempfile.mkdtemp(), "model.pt2")',
                 "torch._inductor.aoti_compile_and_package(program, package_path=package)"]
    if step in ("load", "run"):
        body.append("serve_fresh(package, inputs)  # in a fresh interpreter that imports torch only")
        parts += ("serve_fresh",)
    return Steps(body, parts=parts, imports=("import os", "import tempfile", "from torch.export import Dim"),
                 inputs=tensors, constants={"CONSTANTS": constants_source(constants), "DYNAMIC": repr(dynamic)},
                 notes=[f"up to the failing step ({step}); the check also serves a shorter and a longer prompt and "
                        "compares every call with eager"])


def _aoti_steps(step: str) -> list[str]:
    """The lines after `program` exists, up to `step`: compile and package, then serve in a fresh interpreter."""
    body = ['package = os.path.join(tempfile.mkdtemp(), "model.pt2")',
            "torch._inductor.aoti_compile_and_package(program, package_path=package)"]
    if step in ("load", "run"):
        body.append("serve_fresh(package, media)  # in a fresh interpreter that imports torch only")
    return body


def aoti_generate(ctx: Context) -> Steps:
    found = re.match(r"(\w+): part (\w+): ", ctx.cell.reason)
    if not found or found.group(1) not in ("compile", "package", "load", "run") or found.group(2) != "vision":
        raise NoTemplate("only a failure of the vision part's compile, load or run is written (the text parts carry "
                         "a dynamic prompt length and the cache between calls)")
    step = found.group(1)
    if "vision" in (ctx.metrics.get("dynamic_parts") or []):
        raise NoTemplate("the vision part was exported with dynamic dimensions, which the template does not restate")
    facts = generation_facts(ctx)
    if facts["vision"] is None:
        raise NoTemplate("the model has no vision part the check exports")
    body = vision_first_lines(facts) + [f"program = export_part(VisionPart(model{facts['vision']}), kwargs=media)",
                                        *_aoti_steps(step)]
    parts = ("export_part", "VisionPart") + (("serve_fresh",) if step in ("load", "run") else ())
    return Steps(body, parts=parts, imports=("import os", "import tempfile"), inputs=facts["inputs"],
                 notes=[f"only the vision part, up to the failing step ({step}); the check compiles every "
                        "generation part and serves the requests token by token"])
