"""`conformance jobs`: the publishing run as a job list, on one machine or many, and a stopped run that continues.

The groups come from the registry; the shards from the budget and the published seconds, exactly as the runs'
``--shard`` takes them. The runs are real (`python -m pytest` per job, the real plugin) on fake classes
(conformance/meta/fake_cases.py): three classes (one passes, one fails, one cannot be built), two groups (plain,
cut to two cheap checks, and dynamic). The job list sharded and run job by job, merged, equals one unsharded run of
the same cells; a run killed in the middle of a job continues from its part files without running a recorded cell
again; a job whose envelope was deleted runs again, alone.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conformance import locations
from conformance.checks.common import exporter_table, registry
from conformance.meta.fake_cases import conftest
from conformance.meta.test_provenance import assert_no_machine_path
from conformance.report import cell_code, diff, render
from conformance.report import envelope as report
from conformance.run import shards
from conformance.tools import cli, job_amend, job_publish, job_run
from conformance.tools import jobs as joblists

pytestmark = [pytest.mark.meta, pytest.mark.xdist_group("jobs")]  # one worker builds the shared runs once

OK, RAISES, BROKEN = (f"{n}ForConditionalGeneration" for n in ("Ok", "Raises", "BuildFails"))
CLASSES = [BROKEN, OK, RAISES]
CHECKS = ("build", "compile_prefill", "compile_dynamic", "export_dynamic")
MATRIX = "from conformance.run.cells import matrix_tests\n\nglobals().update(matrix_tests())\n"
# Every fake check logs that it ran (ran.log, in the run's folder) and kills its process where a file says so.
LOGGED = '''

import dataclasses as _dataclasses


def _dynamic(case):
    if case.info.name.startswith("Raises"):
        raise ValueError("the fake prompt axis was specialised")
    return {"max_abs_diff": 0.0}


def _logged(check_id, run):
    def wrapped(case):
        with open("ran.log", "a") as log:
            log.write(f"{case.info.name} {check_id}\\n")
        if os.path.exists(f"kill-{check_id}-{case.info.name}"):
            os.kill(os.getpid(), 9)  # the machine dies in the middle of the job
        return run(case)
    return wrapped


@pytest.fixture(autouse=True)
def logged_checks(monkeypatch, fake_checks):
    from conformance.checks.common import registry

    for check_id in ("build", "compile_prefill", "compile_dynamic", "export_dynamic"):
        spec = registry.get(check_id)
        run = _dynamic if check_id.endswith("_dynamic") else spec.run
        monkeypatch.setitem(registry.CHECKS, check_id, _dataclasses.replace(spec, run=_logged(check_id, run)))
'''


def make_root(path: Path) -> Path:
    """A folder the jobs run in: the fake classes' conftest, the matrix module, no expectations, a README."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "conftest.py").write_text(conftest() + LOGGED)
    (path / "test_matrix.py").write_text(MATRIX)
    (path / "none.toml").write_text("")
    (path / "README.md").write_text(f"# fake\n\n{render.START_MARKER}\n{render.END_MARKER}\n")
    return path


def job_list(root: Path, out_dir: str, shards_asked: dict, **request) -> dict:
    """The job list of the three fake classes, plain (build, compile_prefill) and dynamic, written to root."""
    asked = joblists.Request(envs=(joblists.installed_env(),), groups=("plain", "dynamic"), checks=CHECKS,
                             models=",".join(CLASSES), shards=shards_asked, workers=1, out_dir=out_dir,
                             target="test_matrix.py", pytest_args=("-p", "no:cacheprovider", "--expectations",
                                                                   "none.toml"), **request)
    joblist = joblists.plan(asked, root, names_of=lambda version: list(CLASSES))
    (root / f"{out_dir}.jobs.json").write_text(json.dumps(joblist))
    return joblist


def run_list(joblist: dict, root: Path, parallel: int = 1) -> list[job_run.JobResult]:
    return job_run.run_jobs(joblist["jobs"], root, {}, parallel, env=joblist["env"], echo=lambda line: None)


def verdicts(envelope: dict) -> dict[tuple[str, str], str]:
    return {(m, c): cell["verdict"] for m, row in envelope["models"].items() for c, cell in row["cells"].items()}


def ran(root: Path) -> list[tuple[str, str]]:
    log = root / "ran.log"
    return [tuple(line.split()) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.fixture(scope="module")
def subprocess_env():
    """The jobs' Pythons import this checkout's suite (the conftest's plugin), wherever they run."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", str(locations.REPOSITORY))
        yield


@pytest.fixture(scope="module")
def one_run(tmp_path_factory, subprocess_env):
    """The one-machine run: each group unsharded, both at once (`--parallel 2`), merged."""
    root = make_root(tmp_path_factory.mktemp("one"))
    joblist = job_list(root, "single", {"*": 1})
    results = run_list(joblist, root, parallel=2)
    assert [r.status for r in results] == ["done", "done"], results
    return root, joblist, job_publish.merge_version(joblist, joblist["versions"][0]["env"], root)


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory, subprocess_env):
    """The job list sharded (plain in two), killed in the dynamic job at Ok's export_dynamic, then run again."""
    root = make_root(tmp_path_factory.mktemp("stopped"))
    joblist = job_list(root, "jobs", {"plain": 2})
    kill = root / f"kill-export_dynamic-{OK}"
    kill.write_text("")
    first = run_list(joblist, root)
    first_ran = ran(root)
    dynamic = JobFilesOf(root, joblist, "dynamic")
    parts = [json.loads(line) for p in dynamic.parts.part_files() for line in p.read_text().splitlines()]
    kill.unlink()
    (root / "ran.log").unlink()
    second = run_list(joblist, root)
    return {"root": root, "joblist": joblist, "first": first, "first_ran": first_ran, "parts": parts,
            "second": second, "second_ran": ran(root)}


def JobFilesOf(root: Path, joblist: dict, group: str) -> job_run.JobFiles:
    job = next(j for j in joblist["jobs"] if j["group"] == group)
    return job_run.JobFiles(root / job["out"])


# --------------------------------------------------------------------------- the groups and the list


def test_the_groups_are_the_registry_s_columns():
    groups = {g.name: g for g in joblists.column_groups()}
    assert list(groups) == ["plain", "inductor", "dynamic", "exporters", "aoti", "onnx", "executorch",
                            "openvino", "quantized", "plain~bf16", "inductor~bf16", "plain~fp16", "inductor~fp16"]
    plain = [c.id for c in registry.load_all().values() if not c.opt_in and not c.extra]
    assert list(groups["plain"].checks) == plain and "build" in plain and "compile_dynamic" not in plain
    assert groups["inductor"].pytest_args() == ["--checks", "compile_prefill,compile_decode", "--backend", "inductor"]
    assert groups["dynamic"].pytest_args() == ["--checks", "compile_dynamic,export_dynamic"]
    assert groups["exporters"].pytest_args() == ["--checks", "exporter_dynamo_forward,exporter_dynamo_generate"]
    assert groups["aoti"].pytest_args() == ["--checks", "aoti_forward,aoti_generate", "--cell-timeout", "900"]
    assert groups["onnx"].pytest_args() == ["--checks", "export_onnx,onnx_generate,exporter_onnx_forward,"
                                                        "exporter_onnx_generate"]
    assert groups["executorch"].pytest_args() == ["--checks", "executorch,exporter_executorch_forward,"
                                                              "exporter_executorch_generate", "--cell-timeout", "900"]
    assert groups["openvino"].pytest_args() == ["--checks", "exporter_openvino_forward,exporter_openvino_generate"]
    quantized = [row.id for row in exporter_table.COLUMNS if row.quantizer]
    assert groups["quantized"].pytest_args() == ["--checks", ",".join(quantized), "--cell-timeout", "900"]



def test_the_half_precision_groups_run_the_plain_and_backend_columns_with_dtype():
    """Issue 52: bfloat16 and float16 each run the plain group's and each backend's checks again with --dtype; the
    float32 groups keep their names and commands; a job says its dtype; a publishing run that leaves the dtype
    groups out names no column as not run for them (their columns are named only where they ran)."""
    groups = {g.name: g for g in joblists.column_groups()}
    for short, dtype in (("bf16", "bfloat16"), ("fp16", "float16")):
        assert groups[f"plain~{short}"].checks == groups["plain"].checks
        assert groups[f"plain~{short}"].pytest_args() == [*groups["plain"].pytest_args(), "--dtype", dtype]
        assert groups[f"inductor~{short}"].pytest_args() == [*groups["inductor"].pytest_args(), "--dtype", dtype]
    assert "--dtype" not in groups["plain"].pytest_args() + groups["inductor"].pytest_args()
    asked = joblists.Request(envs=(joblists.installed_env(),), groups=("plain", "plain~bf16"), checks=("build",))
    joblist = joblists.plan(asked, Path("."), names_of=lambda v: [OK])
    assert [(j["group"], j["dtype"]) for j in joblist["jobs"]] == [("plain", "float32"), ("plain~bf16", "bfloat16")]
    assert joblist["jobs"][1]["id"].endswith("-plain~bf16-build-1of1") and "--dtype" in joblist["jobs"][1]["command"]
    assert "build" not in joblist["versions"][0]["not_run"]
    only_plain = joblists.plan(joblists.Request(envs=asked.envs, groups=("plain",)), Path("."), names_of=lambda v: [OK])
    assert not any("~" in c for c in only_plain["versions"][0]["not_run"])


def test_a_rerun_of_some_columns_never_shares_the_whole_group_s_files(tmp_path):
    """A narrowed group's job (--checks) is named after its checks: in the same out_dir it neither counts as the
    whole group's finished job nor clears that job's envelope (job_run clears files another command left)."""
    def ids(**request):
        asked = joblists.Request(envs=(joblists.installed_env(),), groups=("dynamic",), **request)
        return [(j["id"], j["out"]) for j in joblists.plan(asked, tmp_path, names_of=lambda v: [OK])["jobs"]]

    [(whole, whole_out)] = ids()
    [(narrowed, narrowed_out)] = ids(checks=("export_dynamic",))
    assert whole.endswith("-dynamic-1of1") and narrowed.endswith("-dynamic-export_dynamic-1of1")
    assert whole_out != narrowed_out


def test_a_new_opt_in_group_or_extra_is_a_new_group(monkeypatch):
    monkeypatch.setattr(registry, "CHECKS", dict(registry.load_all()))
    registry.check("slow_probe", column=97, opt_in="slow")(lambda case: {})
    registry.check("probe", column=98, requires=("conformance_no_such_package",), extra="probe")(lambda case: {})
    groups = {g.name: g for g in joblists.column_groups()}
    assert groups["slow"].checks == ("slow_probe",) and groups["probe"].extra == "probe"
    chosen, not_run = joblists.choose_groups(list(groups.values()), [], "installed")
    assert "probe" not in [g.name for g in chosen] and "slow" in [g.name for g in chosen]
    assert not_run["probe"] == ("needs conformance_no_such_package, not installed: "
                                "pip install 'vlm-conformance[probe]'")
    chosen, not_run = joblists.choose_groups(list(groups.values()), [], "all")  # each runner installs its extra
    assert "probe" in [g.name for g in chosen] and "probe" not in not_run
    chosen, not_run = joblists.choose_groups(list(groups.values()), ["plain"], "all")
    assert [g.name for g in chosen] == ["plain"] and not_run["slow_probe"] == registry.opt_in_reason("slow_probe")


def test_the_budget_sizes_the_shards_from_the_published_seconds(monkeypatch, tmp_path):
    seconds = {f"M{i:02}ForConditionalGeneration": float(10 + i) for i in range(20)}  # 390 s of cells
    monkeypatch.setattr(shards, "published_estimates", lambda checks=None, backend="eager": seconds)
    request = joblists.Request(envs=(joblists.installed_env(),), groups=("plain",), budget=150.0)
    joblist = joblists.plan(request, tmp_path, names_of=lambda version: sorted(seconds))
    jobs = joblist["jobs"]
    expected = shards.plan(sorted(seconds), seconds, 150.0, 2)
    assert len(jobs) == expected.shards > 1
    assert all(job["wall_seconds"] <= 150.0 for job in jobs)
    assert sorted(c for job in jobs for c in job["classes"]) == sorted(seconds)  # every class once
    for index, job in enumerate(jobs, start=1):  # the classes its --shard takes
        spec = f"{index}/{len(jobs)}"
        assert job["classes"] == shards.share_of(sorted(seconds), spec, seconds)
        assert job["id"] == f"{joblists.installed_env()}-plain-{index}of{len(jobs)}"
        assert job["command"][:4] == ["python", "-m", "pytest", "conformance/test_matrix.py"]
        assert job["command"][job["command"].index("--shard") + 1] == spec
        assert job["command"][-2:] == ["--matrix-out", job["out"]]
    assert joblist["wall_seconds"] == {"one_machine": round(sum(j["wall_seconds"] for j in jobs), 1),
                                       "runners": max(j["wall_seconds"] for j in jobs)}
    assert joblists.plan(request, tmp_path, names_of=lambda version: sorted(seconds)) == joblist  # no clock
    assert_no_machine_path(joblist, tmp_path)
    matrix = joblists.github_matrix(joblist)
    assert [entry["id"] for entry in matrix["include"]] == [job["id"] for job in jobs]
    assert matrix["include"][0]["constraints"] == joblists.version_of(joblists.installed_env()).constraints


def test_an_extra_s_job_installs_its_extra_with_the_pins_of_its_version(tmp_path):
    (tmp_path / "constraints").mkdir()
    (tmp_path / "constraints" / "onnx.txt").write_text("-r gate.txt\n")
    onnx = next(g for g in joblists.column_groups() if g.name == "onnx")
    gate, older = (joblists.version_of(env) for env in ("gate", "tf457"))
    assert joblists.install_line(gate, onnx, tmp_path) == ("onnx.txt", "dev,onnx")
    assert joblists.install_line(older, onnx, tmp_path) == ("tf457.txt", "dev,onnx")  # onnx.txt pins the gate's


@pytest.mark.parametrize("argv, needle", [
    (["jobs", "list", "--groups", "plain,nope"], "--groups: unknown group 'nope'"),
    (["jobs", "list", "--extras", "nope"], "--extras: no group needs the extra 'nope'"),
    (["jobs", "list", "--shards", "plain=0"], "--shards: 'plain=0' is not N or GROUP=N"),
    (["jobs", "list", "--env", "tf999"], "--env: 'tf999' is not a supported version's env"),
    (["jobs", "list", "--checks", "nope"], "--checks: unknown check id 'nope'"),
    (["jobs", "run", "--from", "missing.json"], "missing.json: no such file"),
    (["jobs", "publish", "--python", "gate"], "--python: 'gate' is not ENV=PATH"),
    (["jobs", "run", "--python", "gate=/no/such/python"], "--python: /no/such/python is not a Python interpreter"),
    (["jobs", "publish", "--env", "tf999"], "--env: the job list has no version 'tf999'; it has gate"),
    (["jobs", "run", "--budget", "60"], "--from: the job list holds its selection; --budget is for planning one"),
])
def test_bad_input_is_one_line(capsys, monkeypatch, tmp_path, argv, needle):
    monkeypatch.chdir(tmp_path)
    if argv[1] != "list" and "--from" not in argv:  # options of a job list: give it one
        listed = {"schema": joblists.SCHEMA, "jobs": [], "versions": [{"env": "gate"}]}
        (tmp_path / "j.json").write_text(json.dumps(listed))
        argv = argv + ["--from", "j.json"]
    assert cli.main(argv) == cli.USAGE_ERROR
    err = capsys.readouterr().err
    assert err.startswith("conformance: error: ") and err.count("\n") == 1 and needle in err, err


def test_a_job_whose_shard_would_now_take_other_classes_is_named_and_not_run(capsys, monkeypatch, tmp_path):
    """A publication between planning a list and running it changes the seconds a ``--shard`` deals by: `jobs
    status` names such jobs and `jobs run` refuses them in one line, before any runs (`jobs publish` would refuse
    their runs)."""
    seconds = {f"M{i:02}ForConditionalGeneration": float(10 + i) for i in range(20)}
    monkeypatch.setattr(shards, "published_estimates", lambda checks=None, backend="eager": seconds)
    request = joblists.Request(envs=(joblists.installed_env(),), groups=("plain",), budget=150.0)
    joblist = joblists.plan(request, tmp_path, names_of=lambda version: sorted(seconds))
    published = {"seconds": seconds}
    monkeypatch.setattr(shards, "estimates", lambda envelope, checks=None, backend="eager": published["seconds"])
    assert len(joblist["jobs"]) > 1 and joblists.redealt(joblist, tmp_path / "none.json") == []
    published["seconds"] = {name: 100.0 - value for name, value in seconds.items()}  # another publication's
    moved = joblists.redealt(joblist, tmp_path / "none.json")
    assert moved and set(moved) <= {job["id"] for job in joblist["jobs"]}
    (tmp_path / "j.json").write_text(json.dumps(joblist))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["jobs", "status", "--from", "j.json"]) == 0
    assert f"{len(moved)} job(s) not done ({moved[0]}" in capsys.readouterr().out
    assert cli.main(["jobs", "run", "--from", "j.json"]) == cli.USAGE_ERROR
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{len(moved)} job(s) to run ({moved[0]}" in err and "plan the list again" in err
    assert not (tmp_path / "reports").exists()  # nothing ran


# --------------------------------------------------------------------------- the runs


def test_the_jobs_merged_equal_one_run_of_the_same_cells(one_run, stopped_run):
    _, _, single = one_run
    root, joblist = stopped_run["root"], stopped_run["joblist"]
    assert [j["id"].split("-", 1)[1] for j in joblist["jobs"]] == [
        "plain-build+compile_prefill-1of2", "plain-build+compile_prefill-2of2", "dynamic-1of1"]
    merged = job_publish.merge_version(joblist, joblist["versions"][0]["env"], root)
    cells = verdicts(merged)
    assert cells == verdicts(single)
    assert len(cells) == len(CLASSES) * len(CHECKS)
    assert {cells[OK, c] for c in CHECKS} == {"pass"} and cells[RAISES, "export_dynamic"] == "fail"
    assert cells[BROKEN, "build"] == "error"
    assert diff.diff_envelopes(single, merged) == []  # `conformance diff`: no verdict changed
    assert [c for c in merged["checks"] if c not in merged["not_run"]] == list(CHECKS)
    assert len(merged["environment"]["runs"]) == 4  # two plain shards, the dynamic job's killed try and its rest
    assert_no_machine_path(merged, root)


def test_a_killed_run_continues_where_it_stopped_and_runs_no_recorded_cell_again(stopped_run):
    first, second = stopped_run["first"], stopped_run["second"]
    assert [r.status for r in first] == ["done", "done", "stopped"]
    assert "exit -9" in first[2].message and "the same command continues it" in first[2].message
    recorded = {(r["model"], r["check"]) for r in stopped_run["parts"]}
    assert (OK, "compile_dynamic") in recorded and (OK, "export_dynamic") not in recorded
    assert [r.status for r in second] == ["skipped", "skipped", "done"]
    assert second[2].resumed == len(recorded) > 0
    again = set(stopped_run["second_ran"])
    assert again and not again & recorded  # nothing recorded ran again
    assert (OK, "export_dynamic") in again  # the cell it was killed in did
    assert all(check.endswith("_dynamic") for _, check in again)  # the finished plain jobs did not run again
    files = JobFilesOf(stopped_run["root"], stopped_run["joblist"], "dynamic")
    job = next(j for j in stopped_run["joblist"]["jobs"] if j["group"] == "dynamic")
    assert files.done(job["command"]) and not files.attempts() and not files.parts.path.exists()


def test_a_deleted_job_runs_again_alone_and_an_unnoted_envelope_is_kept(stopped_run, one_run, tmp_path):
    root, joblist = tmp_path / "copy", stopped_run["joblist"]
    shutil.copytree(stopped_run["root"], root)  # every path of a job list is relative to its root
    plain = JobFilesOf(root, joblist, "plain")
    kept = verdicts(json.loads(plain.out.read_text()))
    plain.out.unlink()  # its output lost
    dynamic = JobFilesOf(root, joblist, "dynamic")
    dynamic.done_note.unlink()  # the runner died after this job's pytest wrote its envelope
    (root / "ran.log").unlink(missing_ok=True)
    results = run_list(joblist, root)
    assert [r.status for r in results] == ["done", "skipped", "done"]
    assert results[2].resumed == 6 and results[2].cells == 6  # every cell kept: pytest collected none
    assert set(ran(root)) == {k for k in kept if k[0] != BROKEN}  # only the deleted job's cells ran (a class
    # that cannot be built never calls its checks)
    assert verdicts(json.loads(plain.out.read_text())) == kept
    merged = job_publish.merge_version(joblist, joblist["versions"][0]["env"], root)
    assert verdicts(merged) == verdicts(one_run[2])


def test_files_another_command_left_under_a_job_s_name_are_cleared_not_merged(tmp_path):
    job = {"id": "gate-plain-1of1", "out": "jobs/gate/plain-1of1.json",
           "command": ["python", "-m", "pytest", "test_matrix.py", "--models", "A*"]}
    other = job["command"][:-1] + ["B*"]  # an earlier list with other --models wrote the same file names
    files = job_run.JobFiles(tmp_path / job["out"])
    files.out.parent.mkdir(parents=True)
    files.out.write_text("{}")
    files.done_note.write_text(json.dumps({"command": other, "cells": 3}))
    files.started.write_text(json.dumps({"command": other}))
    assert files.done(other) and not files.done(job["command"]) and not files.belongs_to(job["command"])
    result = job_run.run_job(job, tmp_path, shutil.which("true"))  # a command that records no cell
    assert (result.status, result.cells) == ("done", 0) and not files.out.exists()
    assert "the files here were another command's: cleared" in files.log.read_text()
    assert files.done(job["command"]) and files.belongs_to(job["command"])


def test_a_job_another_cell_code_finished_runs_again_and_says_so(tmp_path):
    job = {"id": "gate-plain-1of1", "out": "jobs/gate/plain-1of1.json",
           "command": ["python", "-m", "pytest", "test_matrix.py", "--models", "A*"]}
    files = job_run.JobFiles(tmp_path / job["out"])
    files.out.parent.mkdir(parents=True)
    files.done_note.write_text(json.dumps({"command": job["command"], "cells": 0, "cell_code": "0123456789ab"}))
    files.started.write_text(json.dumps({"command": job["command"], "cell_code": "0123456789ab"}))
    assert files.done(job["command"]) and not files.done(job["command"], cell_code.of_package())
    result = job_run.run_job(job, tmp_path, shutil.which("true"))
    assert result.status == "done" and "made by cell code 0123456789ab" in result.message
    assert "run again" in job_run.line(result, 1, 1)
    assert files.done(job["command"], cell_code.of_package())
    again = job_run.run_job(job, tmp_path, shutil.which("true"))  # now this suite's: finished, not run again
    assert again.status == "skipped"


def test_a_stopped_try_of_another_cell_code_is_cleared_not_continued(tmp_path):
    job = {"id": "gate-plain-1of1", "out": "jobs/gate/plain-1of1.json",
           "command": ["python", "-m", "pytest", "test_matrix.py"]}
    files = job_run.JobFiles(tmp_path / job["out"])
    files.out.parent.mkdir(parents=True)
    files.started.write_text(json.dumps({"command": job["command"]}))  # before the field: unknown
    files.out.write_text("{}")  # the envelope a Ctrl-C'd try wrote
    result = job_run.run_job(job, tmp_path, shutil.which("true"))
    assert result.status == "done" and result.resumed == 0 and not files.attempts()
    assert "the stopped try here was made by other cell code" in files.log.read_text()


def test_envelopes_of_another_cell_code_are_not_published(one_run, tmp_path):
    root, joblist, _ = one_run
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    env = joblist["versions"][0]["env"]
    assert job_publish.merge_version(joblist, env, copy)["suite"]["cell_code"] == cell_code.of_package()
    files = job_run.JobFiles(copy / joblist["jobs"][0]["out"])
    envelope = json.loads(files.out.read_text())
    envelope["suite"] = {"version": "0.1.0", "commit": "abc1234-dirty"}  # a run of an edited tree, before the field
    files.out.write_text(json.dumps(envelope))
    note = json.loads(files.done_note.read_text())
    files.done_note.write_text(json.dumps({k: v for k, v in note.items() if k != "cell_code"}))
    with pytest.raises(joblists.JobsError, match=rf"1 job\(s\) of {env} were made by other cell code than this "
                                                 rf"suite's {cell_code.of_package()}: {re.escape(joblist['jobs'][0]['id'])} "
                                                 r"\(unknown\); `conformance jobs run` on the same list runs them"):
        job_publish.merge_version(joblist, env, copy)


def test_a_job_that_ran_other_classes_than_its_entry_lists_is_not_published(one_run):
    root, joblist, _ = one_run
    job = joblist["jobs"][0]
    ran = sorted(json.loads((root / job["out"]).read_text())["models"])
    dealt_again = dict(joblist, jobs=[dict(job, classes=ran[1:] + ["ElsewhereForConditionalGeneration"]),
                                      *joblist["jobs"][1:]])
    with pytest.raises(joblists.JobsError, match=rf"job {re.escape(job['id'])} ran 1 class\(es\) its entry does not "
                                                 r"list and left out 1 it lists .*--rerun --only"):
        job_publish.merge_version(dealt_again, job["env"], root)


def test_the_merge_judges_every_cell_against_today_s_expectations(one_run, tmp_path):
    root, joblist, single = one_run
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    assert single["models"][RAISES]["cells"]["export_dynamic"]["verdict"] == "fail"  # listed nowhere when it ran
    found = single["models"][RAISES]["cells"]["export_dynamic"]["fingerprint"]
    (copy / "none.toml").write_text(  # listed since, with the failure's fingerprint
        '[[cell]]\nmodel = "%s"\ncheck = "export_dynamic"\nverdict = "fail"\nreason = "the fake prompt axis"\n'
        '[cell.fingerprint]\n%s' % (RAISES, "".join(f"{k} = {json.dumps(v)}\n" for k, v in found.items())))
    merged = job_publish.merge_version(joblist, joblist["versions"][0]["env"], copy)
    assert merged["models"][RAISES]["cells"]["export_dynamic"]["verdict"] == "xfail"
    assert {k: v for k, v in verdicts(merged).items() if k != (RAISES, "export_dynamic")} == \
        {k: v for k, v in verdicts(single).items() if k != (RAISES, "export_dynamic")}


def test_status_says_where_each_job_stands_and_runs_nothing(one_run, tmp_path, capsys):
    root, joblist, _ = one_run
    envelope = (root / joblist["jobs"][0]["out"]).read_text()
    command = ["python", "-m", "pytest", "test_matrix.py"]
    jobs = [{"id": f"gate-plain-{n}of5", "env": "gate", "group": "plain", "out": f"jobs/{n}.json",
             "command": command + [str(n)], "wall_seconds": 10.0} for n in range(1, 6)]
    this = cell_code.of_package()
    notes = [(this, "done"), ("0123456789ab", "done"), (this, "started"), ("", "started"), None]
    for job, note in zip(jobs, notes):
        files = job_run.JobFiles(tmp_path / job["out"])
        files.out.parent.mkdir(parents=True, exist_ok=True)
        if note is None:
            continue
        code, what = note
        if what == "done":
            files.done_note.write_text(json.dumps({"command": job["command"], "cells": 0, "cell_code": code,
                                                   "seconds": 30.0}))
        else:  # a try stopped after writing its envelope (Ctrl-C)
            files.started.write_text(json.dumps({"command": job["command"], **({"cell_code": code} if code else {})}))
            files.out.write_text(envelope)
    for stray in ("old-1of1.json", "old-1of1.done.json"):  # an earlier plan's job, committed in the same folder
        (tmp_path / "jobs" / stray).write_text("{}")
    listed = tmp_path / "jobs.json"
    listed.write_text(json.dumps({**joblist, "jobs": jobs}))
    assert cli.main(["jobs", "status", "--from", str(listed), "--root", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    cells = sum(len(row["cells"]) for row in json.loads(envelope)["models"].values())
    assert lines[:5] == [
        "gate-plain-1of5: done, 0 cells",
        "gate-plain-2of5: done by cell code 0123456789ab, not this suite's: runs again",
        f"gate-plain-3of5: running or stopped, {cells} cells recorded (a next run keeps them)",
        "gate-plain-4of5: not started (a stopped try of another command or cell code lies here: the next run clears it)",
        "gate-plain-5of5: not started"]
    # four jobs left, each estimated by the group's measured 30 s rather than the published 10
    assert lines[5].startswith(f"1 of 5 jobs done by this suite's cell code {this}; about 120 s of wall left")
    # the done job took 30 s of its planned 10: the four left, 40 s planned, take about 120 s at that pace
    assert lines[5].endswith("; the finished job took 3.00 of the walls planned for them, so about 120 s at that pace")
    assert lines[6] == ("2 file(s) beside these jobs belong to none of them (jobs/old-1of1.done.json, "
                        "jobs/old-1of1.json): an earlier plan's; delete them (`git rm`) so that the folder holds this "
                        "list's jobs only")
    assert not (tmp_path / "jobs" / "5.log").exists()  # nothing ran


def test_env_picks_versions_of_a_job_list_so_one_publishes_while_another_runs():
    def job(env, index, wall):
        return {"id": f"{env}-plain-{index}of2", "env": env, "wall_seconds": wall}

    joblist = {"schema": joblists.SCHEMA, "versions": [{"env": "gate", "merged": "j/gate.json"},
                                                       {"env": "tf523", "merged": "j/tf523.json"}],
               "jobs": [job("gate", 1, 50.0), job("tf523", 1, 30.0), job("gate", 2, 70.0), job("tf523", 2, 40.0)],
               "wall_seconds": {"one_machine": 190.0, "runners": 70.0}}
    part = joblists.of_versions(joblist, ["tf523"])
    assert [v["env"] for v in part["versions"]] == ["tf523"]
    assert [j["id"] for j in part["jobs"]] == ["tf523-plain-1of2", "tf523-plain-2of2"]
    assert part["wall_seconds"] == {"one_machine": 70.0, "runners": 40.0}
    assert joblists.of_versions(joblist, ["gate", "tf523"])["jobs"] == joblist["jobs"]


def test_an_unfinished_job_list_is_not_published(one_run, tmp_path):
    root, joblist, _ = one_run
    missing = dict(joblist, jobs=joblist["jobs"] + [dict(joblist["jobs"][0], id="x-plain-9of9", out="nowhere.json")])
    with pytest.raises(joblists.JobsError, match=r"1 job\(s\) of .* have not finished \(x-plain-9of9\): run "
                                                 "`conformance jobs run`"):
        job_publish.merge_version(missing, joblist["versions"][0]["env"], root)


def test_publishing_writes_the_merged_matrix_and_the_readme(one_run, tmp_path, monkeypatch):
    root, joblist, single = one_run
    written = job_publish.publish(joblist, root)
    merged = json.loads((root / joblist["versions"][0]["merged"]).read_text())
    assert verdicts(merged) == verdicts(single)
    names = {p.relative_to(root).as_posix() for p in written}
    if joblists.version_of(joblist["versions"][0]["env"]).is_gate:
        assert {"reports/matrix.json", "reports/MATRIX.md", "README.md"} <= names
        assert render.readme_section(merged) in (root / "README.md").read_text()
        assert OK in (root / "reports" / "MATRIX.md").read_text()
        assert verdicts(json.loads((root / "reports" / "matrix.json").read_text())) == verdicts(single)
    assert_no_machine_path(merged, root)
    from conformance.report import screenshot

    taken = []
    monkeypatch.setattr(screenshot, "png_beside", lambda page, envelope=None: taken.append(page) or f"wrote {page}")
    line = job_publish.published_picture(joblist, root)
    if joblists.version_of(joblist["versions"][0]["env"]).is_gate:
        assert taken == [root / "reports" / "matrix.html"] and line.startswith("wrote ")
    else:
        assert taken == [] and "left as it was" in line


def _crashed_in_its_job(root: Path, job: dict, model: str, column: str) -> dict:
    """The job's envelope with the cell ended as a crashed worker's; the cell as the job had run it."""
    files = job_run.JobFiles(root / job["out"])
    envelope = json.loads(files.out.read_text())
    ran = envelope["models"][model]["cells"][column]
    envelope["models"][model]["cells"][column] = {**ran, "verdict": "error", "observed": "error", "metrics": {},
                                                  "reason": "worker crashed: the process ended without a traceback",
                                                  "fingerprint": {"kind": "crash", "what": "no traceback"}}
    files.out.write_text(json.dumps(envelope))
    return ran


def _amendment(root: Path, job: dict, model: str, column: str, cell: dict, name: str) -> str:
    """An amendment file of the job's group: `cell` as the one cell of a run alone (the job's envelope, cut)."""
    envelope = json.loads((root / job["out"]).read_text())
    row = {**envelope["models"][model], "cells": {column: cell}}
    envelope.update(models={model: row}, summary=report.summarize({model: row}, envelope["checks"]))
    path = root / job_publish.AMENDMENTS / f"{job['env']}-{job['group']}-{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(envelope))
    return path.relative_to(root).as_posix()


def test_a_group_publishes_over_the_published_matrix_its_columns_whole_with_its_amendments(one_run, tmp_path,
                                                                                          capsys):
    """`jobs publish --group`: a group finished after its version was published replaces its columns of the
    published matrix whole (a class it no longer runs keeps no cell there), leaves the other columns as they were,
    and a cell the machine ended in its job (a crashed worker) is the cell of its amendment, run alone. A group
    whose failures no expectation lists yet is not published until `expectations --update` lists them."""
    root, joblist, single = one_run
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    env = joblist["versions"][0]["env"]
    job_publish.publish(joblist, copy)
    published_path = joblists.published_path(joblists.version_of(env), copy)
    published = json.loads(published_path.read_text())
    ghost = "GhostForConditionalGeneration"  # published before, no longer run by the group
    published["models"][ghost] = {**published["models"][OK],
                                  "cells": {c: published["models"][OK]["cells"][c] for c in ("build", "export_dynamic")}}
    published["summary"] = report.summarize(published["models"], published["checks"])
    published_path.write_text(json.dumps(published))
    [job] = job_publish.group_jobs(joblist, env, "dynamic")
    ran = _crashed_in_its_job(copy, job, OK, "export_dynamic")
    name = _amendment(copy, job, OK, "export_dynamic", ran, "alone")
    command = ["jobs", "publish", "--from", str(copy / "single.jobs.json"), "--group", "dynamic", "--no-run",
               "--no-screenshot", "--root", str(copy)]
    failing = sum(v in ("fail", "error") for (m, c), v in verdicts(single).items()
                  if c in ("compile_dynamic", "export_dynamic"))
    assert failing and cli.main(command) == cli.USAGE_ERROR  # its failures are listed nowhere yet: not published
    assert f"({failing} fail with no expectation, 0 pass where one is listed); nothing was published" in \
        capsys.readouterr().err
    assert json.loads(published_path.read_text()) == published
    group_run = copy / "reports" / "latest" / f"{env}-dynamic.json"
    assert set(json.loads(group_run.read_text())["checks"]) == {"compile_dynamic", "export_dynamic"}
    assert cli.main(["expectations", "--update", str(group_run), "--file", str(copy / "none.toml")]) == 0
    assert cli.main(command) == 0
    after = json.loads(published_path.read_text())
    assert sorted(after["models"][ghost]["cells"]) == ["build"]
    observed = {(m, c): cell["observed"] for m, row in after["models"].items() for c, cell in row["cells"].items()}
    assert {k: v for k, v in observed.items() if k[0] != ghost} == \
        {(m, c): cell["observed"] for m, row in single["models"].items() for c, cell in row["cells"].items()}
    assert {verdicts(after)[m, c] for (m, c), v in verdicts(single).items()
            if v in ("fail", "error") and c in ("compile_dynamic", "export_dynamic")} == {"xfail"}
    assert after["models"][OK]["cells"]["export_dynamic"]["observed"] == "pass"
    done = job_publish.publish_group(joblist, env, "dynamic", copy)
    assert (done.amended, done.amendments, done.cells) == (1, [name], 2 * len(CLASSES))


def test_an_amendment_replaces_only_a_cell_the_machine_ended_and_only_at_this_cell_code(one_run, tmp_path):
    root, joblist, _ = one_run
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    env = joblist["versions"][0]["env"]
    [job] = job_publish.group_jobs(joblist, env, "dynamic")
    ran = json.loads((copy / job["out"]).read_text())["models"][OK]["cells"]["export_dynamic"]
    name = _amendment(copy, job, OK, "export_dynamic", ran, "over-a-verdict")
    with pytest.raises(joblists.JobsError, match=rf"{re.escape(name)}: {OK} export_dynamic has a verdict in its job "
                                                 r"\(pass\); an amendment replaces only cells whose run the machine"):
        job_publish.merge_group(joblist, env, "dynamic", copy)
    _crashed_in_its_job(copy, job, OK, "export_dynamic")
    amendment = json.loads((copy / name).read_text())
    amendment["suite"] = {**amendment["suite"], "cell_code": "0123456789ab"}
    (copy / name).write_text(json.dumps(amendment))
    with pytest.raises(joblists.JobsError, match=rf"{re.escape(name)}: made by cell code 0123456789ab, not this "):
        job_publish.merge_group(joblist, env, "dynamic", copy)
    with pytest.raises(joblists.JobsError, match=r"--group: the job list has no group 'nope' for .*; it has "
                                                 r"dynamic, plain"):
        job_publish.group_jobs(joblist, env, "nope")


def test_amend_reruns_alone_the_cells_the_machine_ended_and_the_group_publishes_them(one_run, tmp_path, capsys):
    """`jobs amend`: a finished job's cell that a crashed worker ended runs again alone (one process, no shard or
    workers), into the job's amendment, once (a second amend has nothing left to run); `publish --group` takes it."""
    root, joblist, _ = one_run
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    env = joblist["versions"][0]["env"]
    [job] = job_publish.group_jobs(joblist, env, "dynamic")
    command = job_amend.alone_command(dict(job, command=[*job["command"], "--shard", "1/2", "-n", "2"]), OK,
                                      "export_dynamic", "x.json")
    assert "--shard" not in command and "-n" not in command and command.count("--models") == 1
    assert command[-6:] == ["--models", OK, "--checks", "export_dynamic", "--matrix-out", "x.json"]
    _crashed_in_its_job(copy, job, OK, "export_dynamic")
    assert cli.main(["jobs", "amend", "--from", str(copy / "single.jobs.json"), "--root", str(copy)]) == 0
    assert "1 cell(s) the machine ended, 1 rerun alone now" in capsys.readouterr().out
    path = job_amend.amendment_path(job, copy)
    amendment = json.loads(path.read_text())
    assert verdicts(amendment) == {(OK, "export_dynamic"): "pass"}
    assert job_amend.amend(job, copy, sys.executable) == job_amend.Amended(1, 0, path)
    group, amended, paths = job_publish.merge_group(joblist, env, "dynamic", copy)
    assert (amended, paths) == (1, [path]) and group["models"][OK]["cells"]["export_dynamic"]["observed"] == "pass"


def test_run_shards_says_when_a_group_is_done_and_starts_no_job_past_its_stop(one_run, tmp_path):
    """scripts/run-shards, a publishing run over sessions: it runs a group's jobs not done, one at a time (each
    envelope committed as it finishes), and starts none once its stop file exists or past its --until."""
    root, joblist, _ = one_run
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    (copy / "scripts").mkdir()
    shutil.copy(locations.REPOSITORY / "scripts" / "run-shards", copy / "scripts")

    def run(*args):
        return subprocess.run([str(copy / "scripts" / "run-shards"), *args, "--from", "single.jobs.json",
                               "--python", sys.executable], capture_output=True, text=True, timeout=120)

    done = run("dynamic")
    assert done.returncode == 0 and "every dynamic job of single.jobs.json is done" in done.stdout, done.stderr
    [job] = job_publish.group_jobs(joblist, joblist["versions"][0]["env"], "dynamic")
    job_run.JobFiles(copy / job["out"]).done_note.unlink()
    (copy / "STOP").touch()
    stopped = run("dynamic", "--stop", "STOP")
    assert stopped.returncode == 3 and f"STOP exists: stopping before {job['id']}" in stopped.stdout, stopped.stderr
    assert run("nope").stderr.strip() == "run-shards: single.jobs.json has no job of group 'nope'"
    assert run("dynamic", "--until", "25:00").stderr.strip() == (
        "run-shards: --until 25:00: not a time of day (HH:MM, UTC, e.g. --until 01:45)")


def test_the_job_list_carries_the_not_run_columns_and_the_merge_shows_them(one_run):
    _, joblist, single = one_run
    # The list runs four checks: every other registered column is not run, each with its reason.
    expected = {c for c in registry.check_ids() if c not in CHECKS}
    assert set(single["not_run"]) == set(joblist["versions"][0]["not_run"]) == expected
    assert single["not_run"]["static_cache"] == f"not in this publishing run (--checks {','.join(CHECKS)})"
    assert all(single["not_run"][c] for c in expected)
    assert single["checks"] == [c for c in registry.check_ids()]  # every column, in column order


# --------------------------------------------------------------------------- the workflow (.github/workflows/)


WORKFLOW = locations.REPOSITORY / ".github" / "workflows" / "matrix.yml"


@pytest.fixture(scope="module")
def workflow():
    yaml = pytest.importorskip("yaml")
    if not WORKFLOW.exists():
        pytest.skip("an installed package: no workflow")
    return yaml.safe_load(WORKFLOW.read_text())


def _runs(job: dict) -> list[str]:
    return [step["run"] for step in job["steps"] if "run" in step]


def test_the_workflow_plans_runs_each_entry_on_its_own_runner_and_publishes(workflow):
    plan, run, publish = (workflow["jobs"][name] for name in ("plan", "run", "publish"))
    assert run["needs"] == "plan" and set(publish["needs"]) == {"plan", "run"}
    listing = next(step for step in plan["steps"] if step.get("id") == "list")
    assert plan["outputs"]["matrix"] == "${{ steps.list.outputs.matrix }}" and "--github" in listing["run"]
    assert run["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    used = {word.split(".", 1)[1].rstrip("}").strip() for text in json.dumps(run).split("${{")[1:]
            for word in [text.split("}}")[0].strip()] if word.startswith("matrix.")}
    entry = joblists.github_matrix({"jobs": [{k: "x" for k in ("id", "env", "group", "constraints", "extras",
                                                               "out")}]})["include"][0]
    assert used and used <= set(entry)  # every matrix key the runner reads is in an entry
    uploaded = next(s for s in run["steps"] if s.get("uses", "").startswith("actions/upload-artifact"))
    downloaded = [s for s in publish["steps"] if s.get("with", {}).get("pattern") == "envelope-*"]
    assert uploaded["with"]["path"] == downloaded[0]["with"]["path"] == joblists.OUT_DIR + "/"


def test_the_workflow_installs_by_the_readme_s_command(workflow):
    from conformance.meta.test_project import readme_commands

    install = readme_commands()[0].split(" && .venv/bin/python")[0]  # the venv and the pip line
    assert install.startswith("python3 -m venv .venv && .venv/bin/pip install -c constraints/gate.txt")
    for name in ("plan", "publish"):
        assert install in _runs(workflow["jobs"][name])
    entry = install.replace("constraints/gate.txt", '"constraints/$CONSTRAINTS"').replace("'.[dev]'", '".[$EXTRAS]"')
    assert entry in _runs(workflow["jobs"]["run"])


def test_every_conformance_jobs_command_of_the_workflow_parses(workflow):
    import shlex

    found = []
    for job in workflow["jobs"].values():
        for text in _runs(job):
            for line in text.replace("\\\n", " ").splitlines():
                if "conformance jobs" in line:
                    words = shlex.split(line.split("conformance jobs", 1)[1].split(")")[0])
                    found.append(words)
                    cli.build_parser().parse_args(["jobs"] + ["1" if w.startswith("$") else w for w in words])
    assert [words[0] for words in found] == ["list", "run", "publish"]
