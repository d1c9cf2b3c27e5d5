"""The gate runs every column group the matrix publishes for the impacted classes, and says what it could not run.

A gate is the publishing run's job list restricted to the impacted classes (`tools.job_gate`): its opt-in groups
(dynamic) and extras' groups (onnx) run without --checks naming them. The run is real (one `python -m pytest` per
group, the real plugin, the real checks) over planted models (`planted.py`): one that specialises its prompt length
(every check that traces one prompt passes), one whose head runs an operator ONNX cannot translate, and the correct
one; and one right in float32 and wrong in half precision only (`planted_dtype.Float32MinimumLM`). To keep the meta suite fast the run keeps one check of the plain group (export_forward) and drops the inductor
group's (compile); the groups' list itself is tested whole, without running it.
"""

from __future__ import annotations

import pytest

from conformance import locations
from conformance.checks.common.registry import unavailable
from conformance.meta import gate_project
from conformance.report.summary import summary_text
from conformance.tools import job_gate
from conformance.tools import jobs as joblists

pytestmark = [pytest.mark.meta, pytest.mark.xdist_group("gate_groups")]

MODELS = '''
import torch

from conformance.meta import planted
from conformance.meta.planted import LengthSpecialisedLM, TinyLM


@torch.library.custom_op("planted_gate::running_max", mutates_args=())
def running_max(x: torch.Tensor) -> torch.Tensor:
    """The running maximum over the last dim: an operator of its own, with no ONNX translation."""
    return torch.cummax(x, dim=-1).values


@running_max.register_fake
def _running_max_fake(x):
    return torch.empty_like(x)


class OnnxUntranslatableLM(TinyLM):
    """Its head adds a custom operator's output times zero: eager, compile and torch.export are unchanged (the
    operator has a fake kernel); ONNX has no translation for it."""

    def adjust(self, logits, decode, cache):
        return logits + 0.0 * running_max(logits)


NAMES = ["LengthSpecialisedLM", "OnnxUntranslatableLM", "TinyLM"]
'''
CHECKS = ("export_forward", "export_dynamic", "export_onnx")


def request(root, **asked) -> job_gate.GateRequest:
    return job_gate.GateRequest(classes=("LengthSpecialisedLM", "OnnxUntranslatableLM", "TinyLM"), root=root,
                                out=root / "pr.json", workers=1, target="test_matrix.py",
                                pytest_args=gate_project.PYTEST_ARGS, **asked)


def test_a_gate_runs_every_column_group_of_the_matrix_without_checks(tmp_path):
    joblist = job_gate.gate_joblist(request(tmp_path))
    groups = joblists.column_groups()
    runnable = [g.name for g in groups if not (g.extra and joblists.installed(g))]
    assert joblist["groups"] == runnable
    assert {"plain", "inductor", "dynamic"} <= set(runnable)  # the opt-in group and the other backend too
    ran = {c for job in joblist["jobs"] for c in job["checks"]}
    assert {"compile_dynamic", "export_dynamic"} <= ran
    assert all(job["command"][job["command"].index("--models") + 1] == "LengthSpecialisedLM,OnnxUntranslatableLM,"
               "TinyLM" for job in joblist["jobs"])
    # An extra that is not installed is not run, and the job list says why (the install line).
    for group in (g for g in groups if g.extra and joblists.installed(g)):
        assert all(joblist["versions"][0]["not_run"][c] == unavailable(c) for c in group.checks)


@pytest.fixture(scope="module")
def gate_run(tmp_path_factory):
    if unavailable("export_onnx"):
        pytest.skip(f"export_onnx {unavailable('export_onnx')} (the pr env installs it)")
    root = gate_project.make_root(tmp_path_factory.mktemp("gate"), MODELS)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", str(locations.REPOSITORY))
        return job_gate.run_gate(request(root, checks=CHECKS))


def test_a_specialised_prompt_length_turns_the_gate_red_in_export_dynamic(gate_run):
    found = gate_project.cells(gate_run.envelope)
    assert gate_run.status == 1
    assert found[("LengthSpecialisedLM", "export_dynamic")] == "fail"
    assert found[("LengthSpecialisedLM", "export_forward")] == "pass"  # a static trace does not see it
    assert found[("TinyLM", "export_dynamic")] == "pass"
    cell = gate_run.envelope["models"]["LengthSpecialisedLM"]["cells"]["export_dynamic"]
    assert cell["fingerprint"]["kind"] == "specialisation"


def test_an_operator_onnx_cannot_translate_turns_the_gate_red_in_export_onnx(gate_run):
    found = gate_project.cells(gate_run.envelope)
    assert found[("OnnxUntranslatableLM", "export_onnx")] == "fail"
    assert found[("OnnxUntranslatableLM", "export_forward")] == "pass"
    assert found[("OnnxUntranslatableLM", "export_dynamic")] == "pass"
    assert found[("TinyLM", "export_onnx")] == "pass"


def test_the_envelope_and_the_summary_say_which_published_columns_did_not_run(gate_run):
    record = gate_run.envelope["gate_run"]
    half = [f"export_forward~{d}" for d in ("bf16", "fp16")]  # the plain check again in half precision
    assert record["columns"] == [*CHECKS, *half]
    assert [job["group"] for job in record["jobs"]] == ["plain", "dynamic", "onnx", "plain~bf16", "plain~fp16"]
    assert all(job["status"] == "done" and job["seconds"] > 0 for job in record["jobs"])
    published = job_gate.published_columns()
    assert set(record["not_run"]) == set(published) - set(CHECKS) - set(half)
    assert all(why for why in record["not_run"].values())
    line = next(line for line in summary_text(gate_run.envelope).splitlines() if line.startswith("gate: "))
    assert f"ran {len(published) - len(record['not_run'])} of the {len(published)} published columns" in line
    assert "NOT RUN: build: " in line


HALF_MODELS = '''
from conformance.meta.planted import TinyLM
from conformance.meta.planted_dtype import Float32MinimumLM

NAMES = ["Float32MinimumLM", "TinyLM"]
'''


@pytest.fixture(scope="module")
def half_gate_run(tmp_path_factory):
    root = gate_project.make_root(tmp_path_factory.mktemp("half-gate"), HALF_MODELS)
    asked = job_gate.GateRequest(classes=("Float32MinimumLM", "TinyLM"), root=root, out=root / "pr.json", workers=1,
                                 target="test_matrix.py", pytest_args=gate_project.PYTEST_ARGS, checks=("build",))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", str(locations.REPOSITORY))
        return job_gate.run_gate(asked)


def test_a_regression_in_half_precision_only_turns_the_gate_red_without_naming_its_group(half_gate_run):
    """Float32MinimumLM is right in float32 and makes -inf logits in bfloat16 and float16 (`planted_dtype`): the
    gate runs the half-precision groups by default, so its build~bf16 and build~fp16 cells are red."""
    found = gate_project.cells(half_gate_run.envelope)
    assert half_gate_run.status == 1
    assert [job["group"] for job in half_gate_run.envelope["gate_run"]["jobs"]] == ["plain", "plain~bf16",
                                                                                    "plain~fp16"]
    assert found[("Float32MinimumLM", "build")] == "pass"
    assert found[("Float32MinimumLM", "build~bf16")] == found[("Float32MinimumLM", "build~fp16")] == "fail"
    assert {found[("TinyLM", c)] for c in ("build", "build~bf16", "build~fp16")} == {"pass"}
    info = half_gate_run.envelope["check_info"]
    assert (info["build~bf16"]["dtype"], info["build~fp16"]["dtype"]) == ("bfloat16", "float16")
    assert half_gate_run.envelope["gate_run"]["columns"] == ["build", "build~bf16", "build~fp16"]


def test_plan_budgets_every_group_of_the_gate_from_its_own_columns(tmp_path):
    joblist = job_gate.gate_joblist(request(tmp_path, budget=120.0))
    groups = job_gate.budget_by_group(joblist)
    assert [g["group"] for g in groups if "not_run" not in g] == joblist["groups"]
    assert {g["group"] for g in groups} == {g.name for g in joblists.column_groups()}
    for entry in (g for g in groups if "not_run" not in g):
        jobs = [j for j in joblist["jobs"] if j["group"] == entry["group"]]
        assert entry["shards"] == len(jobs) >= 1
        assert entry["cell_seconds"] == pytest.approx(sum(j["cell_seconds"] for j in jobs), abs=0.2)
        assert {j["backend"] for j in jobs} == {entry["backend"]}
    lines = job_gate.plan_lines(joblist)
    assert lines[0].startswith(f"the whole gate: {len(joblist['groups'])} column groups, about ")
    assert all(any(line.startswith(f"  {g['group']}") for line in lines[1:]) for g in groups)


@pytest.mark.parametrize("argv, needle", [
    ([], "name the change: --since REF --transformers-repo DIR"),
    (["--changed-files", "lib/transformers/models/llava/modeling_llava.py"], "no such file in transformers"),
])
def test_a_gate_that_cannot_start_says_why_in_one_line(capsys, argv, needle):
    from conformance.tools import cli

    assert cli.main(["jobs", "gate", *argv]) == cli.USAGE_ERROR
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and needle in err


def test_a_development_checkout_s_gate_runs_as_the_newest_supported_version(tmp_path, monkeypatch):
    from conformance import versions

    monkeypatch.setattr(versions, "installed_version", lambda: "5.99.0.dev0")
    joblist = job_gate.gate_joblist(request(tmp_path))
    newest = next(v for v in versions.supported() if v.is_gate)
    assert {job["env"] for job in joblist["jobs"]} == {newest.env}
    assert {job["transformers"] for job in joblist["jobs"]} == {"5.99.0.dev0"}  # merging accepts its envelopes
