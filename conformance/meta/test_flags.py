"""`conformance flags`: which declarations a run contradicts, and the patch that sets them in a source tree.

A synthetic envelope holds one class per rule (a flag to set True, one to set
False, and each ambiguous case); a synthetic transformers tree holds one
class per way a class gets its flag (its own line, a shared base, a base that
serves it alone, PreTrainedModel's default, a generated file with its modular
file, a one-line body). The patch is checked with `git apply --check`, and
the tree it leaves is read back: the observed classes changed, nothing else.
The last tests take the published 5.24 run against the installed 5.24.0 source.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from conformance import locations
from conformance.meta.test_report import CHECK_INFO, ENV, cell
from conformance.report import envelope as report
from conformance.report import flag_advice, render
from conformance.tools import cli, flag_patch

pytestmark = pytest.mark.meta

FLAG = "_can_compile_fullgraph"
COMPILE = ("compile_prefill", "compile_decode")
PUBLISHED = locations.REPOSITORY / "reports" / "matrix.json"


def failed(reason: str, kind: str = "", **fingerprint) -> dict:
    made = cell("fail", reason)
    if kind:
        made["fingerprint"] = {"kind": kind, **fingerprint}
    return made


def row(declared, prefill: dict, decode: dict | None = None, build: dict | None = None) -> dict:
    cells = {"build": build or cell("pass"), "compile_prefill": prefill}
    if decode is not None:
        cells["compile_decode"] = decode
    return {"model_type": "x", "declared": {} if declared is None else {FLAG: declared}, "cells": cells}


GUARD = "fullgraph compile failed: GuardOnDataDependentSymNode: Could not guard on data-dependent expression Eq(u0, 0)"
ROWS = {
    # flag declared True, the compiler fails: set False
    "AlphaForConditionalGeneration": row(True, failed(GUARD, "data_dependent_guard", where="m:f"), cell("pass")),
    # declared False, every observing check passes: set True
    "BetaForConditionalGeneration": row(False, cell("pass"), cell("pass")),
    "GammaForConditionalGeneration": row(False, cell("pass"), cell("skip", "no cache")),
    "DeltaForConditionalGeneration": row(True, cell("pass"), failed("decode step recompiled", "recompile")),
    "OwnForConditionalGeneration": row(True, failed(GUARD, "data_dependent_guard")),
    "LoneForConditionalGeneration": row(False, cell("pass")),
    # left alone
    "CallOrderForConditionalGeneration": row(True, failed("call order changes the verdict: ...", "call_order",
                                                          cold="fail", warm="pass")),
    "HarnessForConditionalGeneration": row(True, cell("error", "tiny model or inputs could not be built")),
    "NoBuildForConditionalGeneration": row(True, failed(GUARD, "data_dependent_guard"),
                                           build=failed("the model's own forward fails", "exception")),
    "RefusedForConditionalGeneration": row(True, cell("pass"), failed("ValueError: no bos", "exception")),
    # agrees; no such attribute
    "FineForConditionalGeneration": row(True, cell("pass"), cell("pass")),
    "BareForConditionalGeneration": row(None, failed(GUARD, "data_dependent_guard")),
}
TO_SET = {"AlphaForConditionalGeneration": False, "BetaForConditionalGeneration": True,
          "GammaForConditionalGeneration": True, "DeltaForConditionalGeneration": False,
          "OwnForConditionalGeneration": False, "LoneForConditionalGeneration": True}


def make_run(rows=None, backend: str = "eager", version: str = "5.24.0") -> dict:
    models = copy.deepcopy(rows or ROWS)
    checks = ["build", *COMPILE]
    envelope = {"schema": report.SCHEMA, "created": "2026-11-30T00:00:00Z", "suite": {"version": "0", "commit": ""},
                "environment": {**ENV, "backend": backend, "transformers": version}, "checks": checks,
                "check_info": {c: CHECK_INFO[c] for c in checks}, "models": models}
    envelope["summary"] = report.summarize(models, checks)
    return report.validate_envelope(envelope, "synthetic")


def by_model(advice) -> dict:
    return {a.model: a for a in advice if a.flag == FLAG}


# --------------------------------------------------------------------------- the advice


def test_advice_sets_only_unambiguous_disagreements():
    advice = by_model(flag_advice.advise([make_run()], ["run.json"]))
    assert {m: a.value for m, a in advice.items() if a.action == "set"} == TO_SET
    assert advice["FineForConditionalGeneration"].action == "agrees"
    assert advice["BareForConditionalGeneration"].action == "undeclared"
    why = {m: a.why for m, a in advice.items() if a.action == "ambiguous"}
    assert set(why) == {"CallOrderForConditionalGeneration", "NoBuildForConditionalGeneration",
                        "RefusedForConditionalGeneration"}
    assert "call order" in why["CallOrderForConditionalGeneration"]
    harness = advice["HarnessForConditionalGeneration"]  # an error, no disagreement in the matrix: not observed
    assert harness.action == "unobserved" and "could not observe" in harness.why
    assert "does not build" in why["NoBuildForConditionalGeneration"]
    assert "exception" in why["RefusedForConditionalGeneration"]
    assert all(a.backend == "eager" and a.source == "run.json" for a in advice.values())
    # a False names the findings group of the failure that decided it
    assert advice["AlphaForConditionalGeneration"].cause.endswith(": data_dependent_guard at m:f")
    assert advice["AlphaForConditionalGeneration"].cause.startswith("data_dependent_guard-")


def test_a_checkpoint_profile_s_row_gets_no_advice_of_its_own():
    """The class's flags are advised from its default row; a profile's differing verdict is a finding."""
    profile = {**row(True, failed(GUARD, "data_dependent_guard", where="m:f")),
               "class": "FineForConditionalGeneration", "profile": "other", "checkpoint": "org/other"}
    rows = {"FineForConditionalGeneration": ROWS["FineForConditionalGeneration"],
            "FineForConditionalGeneration:other": profile}
    advice = by_model(flag_advice.advise([make_run(rows)], ["run.json"]))
    assert set(advice) == {"FineForConditionalGeneration"} and advice["FineForConditionalGeneration"].action == "agrees"


def test_advice_reads_run_files_without_fingerprints_by_their_reason():
    rows = copy.deepcopy(ROWS)
    for item in rows.values():
        for made in item["cells"].values():
            made.pop("fingerprint", None)
    advice = by_model(flag_advice.advise([make_run(rows)], ["old.json"]))
    assert advice["AlphaForConditionalGeneration"].value is False  # the data-dependent marker of its reason
    assert advice["DeltaForConditionalGeneration"].value is False  # "recompiled"
    assert advice["CallOrderForConditionalGeneration"].action == "ambiguous"  # its reason says so
    assert advice["RefusedForConditionalGeneration"].action == "ambiguous"  # a ValueError names no compiler failure


def test_known_failures_count_by_what_the_check_said():
    rows = {"AlphaForConditionalGeneration": copy.deepcopy(ROWS["AlphaForConditionalGeneration"]),
            "HarnessForConditionalGeneration": copy.deepcopy(ROWS["HarnessForConditionalGeneration"])}
    rows["AlphaForConditionalGeneration"]["cells"]["compile_prefill"].update(verdict="xfail", expected="fail")
    rows["HarnessForConditionalGeneration"]["cells"]["compile_prefill"].update(verdict="xfail", expected="error")
    advice = by_model(flag_advice.advise([make_run(rows)], ["run.json"]))
    assert advice["AlphaForConditionalGeneration"].value is False
    assert advice["HarnessForConditionalGeneration"].action == "unobserved"  # a listed gap observed nothing
    assert "could not observe" in advice["HarnessForConditionalGeneration"].why


def test_inductor_run_decides_the_compile_flag_where_it_observed_the_class():
    eager = make_run()
    inductor_rows = {"BetaForConditionalGeneration": row(False, failed("graph break", "graph_break"), cell("pass"))}
    inductor = make_run(inductor_rows, backend="inductor")
    advice = by_model(flag_advice.advise([eager, inductor], ["eager.json", "inductor.json"]))
    beta = advice["BetaForConditionalGeneration"]
    assert (beta.action, beta.backend, beta.source) == ("agrees", "inductor", "inductor.json")
    assert advice["GammaForConditionalGeneration"].backend == "eager"  # not in the inductor run
    note = flag_advice.backend_note(list(advice.values()))
    assert "from the inductor run" in note and "eager backend" in note
    eager_only = flag_advice.backend_note(flag_advice.advise([eager], ["eager.json"]))
    assert "eager backend only" in eager_only and "inductor" in eager_only


def test_a_published_matrix_with_inductor_columns_judges_the_compile_flag_by_them():
    inductor_rows = {"BetaForConditionalGeneration": row(False, failed("inductor failed where dynamo alone traces "
                                                                      "the same call fullgraph", "backend"),
                                                         cell("pass")),
                     "AlphaForConditionalGeneration": row(True, cell("skip", "does not apply"))}
    merged = report.merge_envelopes([make_run(), make_run(inductor_rows, backend="inductor")],
                                    ["eager.json", "inductor.json"])
    assert merged["checks"] == ["build", "compile_prefill", "compile_prefill@inductor", "compile_decode",
                                "compile_decode@inductor"]
    assert merged["check_info"]["compile_prefill@inductor"]["backend"] == "inductor"
    assert merged["environment"]["backend"] == "eager"
    assert merged["environment"]["backends"]["inductor"]["source"] == "inductor.json"
    beta_cells = merged["models"]["BetaForConditionalGeneration"]["cells"]
    assert beta_cells["build"] == ROWS["BetaForConditionalGeneration"]["cells"]["build"]  # the main run's
    overclaimed, underclaimed = render.flag_disagreements(merged)
    assert "BetaForConditionalGeneration" not in {d.model for d in underclaimed}  # inductor failed: not flippable
    assert "GammaForConditionalGeneration" in {d.model for d in underclaimed}  # no inductor cell: eager decides
    advice = by_model(flag_advice.advise([merged], ["matrix.json"]))
    beta, gamma = advice["BetaForConditionalGeneration"], advice["GammaForConditionalGeneration"]
    assert (beta.action, beta.backend) == ("agrees", "inductor")
    assert [e.check for e in beta.evidence] == ["compile_prefill@inductor", "compile_decode@inductor"]
    assert (gamma.action, gamma.value, gamma.backend) == ("set", True, "eager")
    alpha = advice["AlphaForConditionalGeneration"]  # its inductor cell does not apply: the eager cells decide
    assert (alpha.action, alpha.value, alpha.backend) == ("set", False, "eager")
    text = render.render_markdown(merged)
    assert "judged by the `@inductor` columns" in text and "(columns `@inductor`: backend inductor)" in text
    assert "`compile_prefill@inductor`" in text


def test_a_half_precision_column_decides_no_flag():
    run = make_run({"BetaForConditionalGeneration": row(False, cell("pass"), cell("pass"))})
    run["checks"].append("compile_prefill~bf16")
    run["check_info"]["compile_prefill~bf16"] = {**CHECK_INFO["compile_prefill"], "dtype": "bfloat16"}
    run["models"]["BetaForConditionalGeneration"]["cells"]["compile_prefill~bf16"] = failed(
        "compiled logits differ from eager by 0.03 > 0.016", "numerical_mismatch")
    assert render.flag_checks(run)[FLAG] == COMPILE  # the float32 columns only: a bf16-only failure is a finding
    _, underclaimed = render.flag_disagreements(run)
    assert "BetaForConditionalGeneration" in {d.model for d in underclaimed}


def test_a_run_under_another_backend_without_compile_columns_is_refused():
    other = make_run(backend="inductor")
    other["checks"] = ["build"]
    other["check_info"] = {"build": CHECK_INFO["build"]}
    for item in other["models"].values():
        item["cells"] = {"build": item["cells"]["build"]}
    with pytest.raises(report.EnvelopeError, match="no check that depends on the backend"):
        report.merge_envelopes([make_run(), other], ["eager.json", "inductor.json"])


def test_runs_of_two_versions_are_refused():
    with pytest.raises(flag_advice.AdviceError, match="different transformers versions"):
        flag_advice.advise([make_run(), make_run(version="5.23.0")], ["a.json", "b.json"])


# --------------------------------------------------------------------------- a synthetic source tree

GENERATED = ("#           This file was automatically generated from src/transformers/models/beta/modular_beta.py.\n"
             "#               Do NOT edit this file manually.\n")
TREE = {
    "modeling_utils.py": """
        class PreTrainedModel:
            _supports_sdpa = False
            _can_compile_fullgraph: bool = False
        """,
    "generation/utils.py": """
        class GenerationMixin:
            pass
        """,
    "models/alpha/modeling_alpha.py": '''
        from ...generation.utils import GenerationMixin
        from ...modeling_utils import PreTrainedModel


        class AlphaPreTrainedModel(PreTrainedModel):
            base_model_prefix = "model"
            _can_compile_fullgraph = True


        class AlphaModel(AlphaPreTrainedModel):
            pass


        class AlphaForConditionalGeneration(AlphaPreTrainedModel, GenerationMixin):
            """Alpha."""

            _tied_weights_keys = {
                "lm_head.weight": "model.embed_tokens.weight",
            }

            def __init__(self, config):
                super().__init__(config)


        class CallOrderForConditionalGeneration(AlphaPreTrainedModel, GenerationMixin):
            def forward(self):
                return 1
        ''',
    "models/beta/modular_beta.py": """
        from ..alpha.modeling_alpha import AlphaForConditionalGeneration


        class BetaForConditionalGeneration(AlphaForConditionalGeneration):
            pass
        """,
    "models/beta/modeling_beta.py": GENERATED + """
        from ...modeling_utils import PreTrainedModel


        class BetaForConditionalGeneration(PreTrainedModel):
            # a comment over the first method
            def forward(self):
                return 1


        class GammaForConditionalGeneration(PreTrainedModel): ...
        """,
    "models/delta/modeling_delta.py": """
        from ...modeling_utils import PreTrainedModel as Base


        class DeltaPreTrainedModel(Base):
            _can_compile_fullgraph = True


        class DeltaForConditionalGeneration(DeltaPreTrainedModel):
            pass


        class OwnForConditionalGeneration(Base):
            _can_compile_fullgraph = True  # measured on CPU


        class LoneForConditionalGeneration(Base):
            _can_compile_fullgraph = False
        """,
}


def write_tree(root: Path) -> Path:
    package = root / "src" / "transformers"
    for rel, text in TREE.items():
        path = package / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = text.splitlines(keepends=True)
        header = "".join(lines[:2]) if text.startswith("#") else ""
        path.write_text(header + textwrap.dedent(text[len(header):]).lstrip("\n"))
    return package


def git(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)


def committed(root: Path) -> Path:
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "tree")
    return root


def changed_lines(diff: str) -> list[str]:
    return [line for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("+++ ", "--- "))]


def assert_only_flag_lines(diff: str) -> None:
    """Every line the diff adds or removes sets the flag, is blank, or is the placeholder body (`pass`, `...`)
    that an added flag replaces (on its own line, or on a one-line class: `class X(Base): ...` -> `class X(Base):`)."""
    changed = changed_lines(diff)
    one_line_classes = {line[1:].rsplit(":", 1)[0] + ":" for line in changed
                        if line.startswith("-class ") and line.rstrip().endswith((": ...", ": pass"))}
    for line in changed:
        text = line[1:]
        assert (FLAG in text or text.strip() in ("", "pass", "...") or text in one_line_classes
                or (line.startswith("-") and text.rsplit(":", 1)[0] + ":" in one_line_classes)), line


def values(package: Path, names) -> dict:
    tree = flag_patch.SourceTree(package)
    found = {}
    for name in names:
        ref, _ = tree.find_class(name)
        owner, value = tree.owner(ref, FLAG)
        found[name] = value
    return found


ALL = ["AlphaPreTrainedModel", "AlphaModel", "AlphaForConditionalGeneration", "CallOrderForConditionalGeneration",
       "BetaForConditionalGeneration", "GammaForConditionalGeneration", "DeltaPreTrainedModel",
       "DeltaForConditionalGeneration", "OwnForConditionalGeneration", "LoneForConditionalGeneration"]


def test_tree_resolves_where_a_class_gets_its_flag(tmp_path):
    tree = flag_patch.SourceTree(write_tree(tmp_path))
    alpha, _ = tree.find_class("AlphaForConditionalGeneration")
    assert tree.owner(alpha, FLAG) == (("models/alpha/modeling_alpha.py", "AlphaPreTrainedModel"), True)
    gamma, _ = tree.find_class("GammaForConditionalGeneration")
    assert tree.owner(gamma, FLAG) == (("modeling_utils.py", "PreTrainedModel"), False)
    delta, _ = tree.find_class("DeltaForConditionalGeneration")  # through `import ... as Base`
    assert tree.mro(delta)[-1] == ("modeling_utils.py", "PreTrainedModel")
    assert tree.inheritors(("models/alpha/modeling_alpha.py", "AlphaPreTrainedModel"), FLAG) == [
        ("models/alpha/modeling_alpha.py", n) for n in ("AlphaModel", "AlphaForConditionalGeneration",
                                                        "CallOrderForConditionalGeneration")]
    assert tree.modular_of("models/beta/modeling_beta.py") == "models/beta/modular_beta.py"
    assert tree.find_class("MissingForConditionalGeneration") == (None, "the source tree does not define the class")


def test_patch_applies_and_changes_only_the_observed_classes(tmp_path):
    package = write_tree(tmp_path)
    before = values(package, ALL)
    patch = flag_patch.make_patch(flag_advice.advise([make_run()], ["run.json"]), flag_patch.SourceTree(tmp_path))
    assert {c.advice.model for c in patch.changes} == set(TO_SET) and not patch.left_alone
    assert patch.notes == ["models/beta/modular_beta.py does not define GammaForConditionalGeneration: after applying, "
                           "regenerate models/beta/modeling_beta.py with utils/modular_model_converter.py and check it "
                           "keeps the flag"]
    committed(tmp_path)
    (tmp_path / "flags.patch").write_text(patch.diff)
    assert git(tmp_path, "apply", "--check", "flags.patch").returncode == 0, git(tmp_path, "apply", "--check",
                                                                                 "flags.patch").stderr
    assert git(tmp_path, "apply", "flags.patch").returncode == 0
    after = values(package, ALL)
    expected = {**before, **TO_SET, "DeltaPreTrainedModel": False}  # Delta's base serves Delta alone
    assert after == expected
    assert_only_flag_lines(patch.diff)
    own = (package / "models/delta/modeling_delta.py").read_text()
    assert "    _can_compile_fullgraph = False  # measured on CPU\n" in own  # changed in place, comment kept
    alpha = (package / "models/alpha/modeling_alpha.py").read_text()
    assert '    }\n    _can_compile_fullgraph = False\n\n    def __init__' in alpha  # after the class attributes
    beta = (package / "models/beta/modeling_beta.py").read_text()
    assert ("class BetaForConditionalGeneration(PreTrainedModel):\n    _can_compile_fullgraph = True\n\n"
            "    # a comment over the first method\n") in beta
    assert "class GammaForConditionalGeneration(PreTrainedModel):\n    _can_compile_fullgraph = True\n" in beta
    modular = (package / "models/beta/modular_beta.py").read_text()  # the modular file says the same
    assert "class BetaForConditionalGeneration(AlphaForConditionalGeneration):\n    _can_compile_fullgraph = True\n" \
        in modular


def test_patch_summary_and_where(tmp_path):
    write_tree(tmp_path)
    advice = flag_advice.advise([make_run()], ["run.json"])
    patch = flag_patch.make_patch(advice, flag_patch.SourceTree(tmp_path))
    where = {c.advice.model: c.where() for c in patch.changes}
    assert where["AlphaForConditionalGeneration"] == (
        "models/alpha/modeling_alpha.py: AlphaForConditionalGeneration (added); AlphaPreTrainedModel keeps it for "
        "2 other class(es), e.g. AlphaModel, CallOrderForConditionalGeneration")
    assert where["DeltaForConditionalGeneration"] == "models/delta/modeling_delta.py: DeltaPreTrainedModel (changed)"
    assert "modular_beta.py: BetaForConditionalGeneration (added)" in where["BetaForConditionalGeneration"]


def test_patch_leaves_a_tree_that_is_not_the_runs_alone(tmp_path):
    write_tree(tmp_path)
    rows = copy.deepcopy(ROWS)
    rows["LoneForConditionalGeneration"]["declared"][FLAG] = True  # the tree says False
    rows["LoneForConditionalGeneration"]["cells"]["compile_prefill"] = failed(GUARD, "data_dependent_guard")
    rows["MissingForConditionalGeneration"] = row(False, cell("pass"))
    patch = flag_patch.make_patch(flag_advice.advise([make_run(rows)], ["run.json"]), flag_patch.SourceTree(tmp_path))
    left = {x.advice.model: x.why for x in patch.left_alone}
    assert "does not match the run" in left["LoneForConditionalGeneration"]
    assert "does not define the class" in left["MissingForConditionalGeneration"]
    assert not [line for line in changed_lines(patch.diff) if "Lone" in line]


def test_not_a_source_tree(tmp_path):
    with pytest.raises(flag_patch.PatchError, match="not a transformers source tree"):
        flag_patch.SourceTree(tmp_path)


# --------------------------------------------------------------------------- the command


def save(path: Path, data) -> str:
    path.write_text(json.dumps(data))
    return str(path)


def test_cli_flags_summary_check_and_patch(tmp_path, capsys):
    run_json = save(tmp_path / "run.json", make_run())
    assert cli.main(["flags", run_json]) == 0
    out = capsys.readouterr().out
    assert f"{FLAG} (observed by compile_decode, compile_prefill): 6 to change (3 to True, 3 to False), 3 " \
           "disagreeing left alone, 1 agree, 1 not observed (harness error or timeout)" in out
    assert "  not observed: HarnessForConditionalGeneration" in out
    assert "  the 3 set False fail for 3 root cause(s)" in out
    assert "eager backend only" in out and "1 class(es) have no _can_compile_fullgraph attribute" in out
    assert cli.main(["flags", run_json, "--check"]) == 1
    assert "6 declared flag(s) disagree" in capsys.readouterr().err
    fine = save(tmp_path / "fine.json", make_run({"FineForConditionalGeneration": ROWS["FineForConditionalGeneration"]}))
    assert cli.main(["flags", fine, "--check"]) == 0
    capsys.readouterr()
    tree = tmp_path / "tf"
    write_tree(tree)
    out_patch = tmp_path / "flags.patch"
    assert cli.main(["flags", run_json, "--patch", "--transformers-repo", str(tree), "-o", str(out_patch)]) == 0
    text = out_patch.read_text()
    assert text.startswith("# conformance flags from ") and "# patch: 6 class(es) in 4 file(s)" in text
    assert "#       patched: models/delta/modeling_delta.py: DeltaPreTrainedModel (changed)" in text
    committed(tree)
    assert git(tree, "apply", "--check", str(out_patch)).returncode == 0  # the summary is a preamble git skips


def test_cli_flags_errors(tmp_path, capsys):
    run_json = save(tmp_path / "run.json", make_run())
    assert cli.main(["flags", run_json, "--transformers-repo", str(tmp_path)]) == cli.USAGE_ERROR
    assert "add --patch" in capsys.readouterr().err
    assert cli.main(["flags", run_json, "--patch", "--transformers-repo", str(tmp_path)]) == cli.USAGE_ERROR
    assert "not a transformers source tree" in capsys.readouterr().err
    other = save(tmp_path / "other.json", make_run(version="5.23.0"))
    assert cli.main(["flags", run_json, other]) == cli.USAGE_ERROR
    assert "different transformers versions" in capsys.readouterr().err


# --------------------------------------------------------------------------- the published run


def installed_transformers() -> tuple[str, Path] | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("transformers"), flag_patch.installed_package()
    except (PackageNotFoundError, flag_patch.PatchError):
        return None


def test_patch_of_the_published_run_applies_to_its_transformers(tmp_path):
    envelope = report.load_envelope(PUBLISHED)
    installed = installed_transformers()
    if installed is None or installed[0] != envelope["environment"]["transformers"]:
        pytest.skip(f"the published run is of transformers {envelope['environment']['transformers']}, "
                    f"installed: {installed[0] if installed else 'none'}")
    advice = flag_advice.advise([envelope], [str(PUBLISHED)])
    model_types = {n: r.get("model_type", "") for n, r in envelope["models"].items()}
    patch = flag_patch.make_patch(advice, flag_patch.SourceTree(installed[1]), model_types)
    to_set = flag_advice.disagreeing(advice)
    assert to_set and len(patch.changes) == len(to_set) and not patch.left_alone
    for path in patch.files:  # the files the patch touches, laid out as in a checkout
        target = tmp_path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(installed[1] / path.removeprefix(flag_patch.DIFF_ROOT + "/"), target)
    committed(tmp_path)
    (tmp_path / "flags.patch").write_text(patch.diff)
    result = git(tmp_path, "apply", "--check", "flags.patch")
    assert result.returncode == 0, result.stderr
    assert_only_flag_lines(patch.diff)
