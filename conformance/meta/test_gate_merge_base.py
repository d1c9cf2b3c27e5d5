"""A pull request judged against its merge base: broken before this change is not the change's.

A fake checkout (git) holds the planted models' module in ``src/`` (as transformers keeps its package): at the base
commit and at the head commit. The gate runs the same jobs at the head (the checkout on the path) and at the base
(a git worktree of the base commit, its ``src/`` first on the path), then judges each head cell against the base's
(`gate.merge_base`). No expectations file lists anything: only the base can make a failing cell green. One check
(export_forward, the plain group) keeps the runs short; the judgement is the same for every column.
"""

from __future__ import annotations

import pytest

from conformance import locations
from conformance.gate import merge_base
from conformance.meta import gate_project
from conformance.report.summary import summary_text
from conformance.tools import job_gate

pytestmark = [pytest.mark.meta, pytest.mark.xdist_group("gate_merge_base")]

BASE = '''
from conformance.meta.planted import DataDependentLM, TinyLM


class AlreadyBrokenLM(DataDependentLM):
    """Broken the same way at the base and at the head."""


class FixedLM(DataDependentLM):
    """Broken at the base, fixed at the head."""


class RegressingLM(TinyLM):
    """Correct at the base, broken at the head."""


class ChangedLM(DataDependentLM):
    """Broken at the base, broken another way at the head."""


NAMES = ["AlreadyBrokenLM", "ChangedLM", "FixedLM", "RegressingLM"]
'''
ADDED = '''class NewLM(TinyLM):
    """Added by the pull request: the base has no such class."""


class NewBrokenLM(DataDependentLM):
    """Added by the pull request, broken."""


'''
HEAD = (BASE.replace("class FixedLM(DataDependentLM)", "class FixedLM(TinyLM)")
        .replace("class RegressingLM(TinyLM)", "class RegressingLM(DataDependentLM)")
        .replace("class ChangedLM(DataDependentLM)", "class ChangedLM(RaisingLM)")
        .replace("import DataDependentLM, TinyLM", "import DataDependentLM, RaisingLM, TinyLM")
        .replace("NAMES = [", ADDED + "NAMES = [\"NewBrokenLM\", \"NewLM\", "))


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """(repo, base commit): the models at the base, then the head's change committed on top."""
    repo = tmp_path_factory.mktemp("checkout")
    return repo, gate_project.fake_checkout(repo, BASE, HEAD, "the pull request")


@pytest.fixture(scope="module")
def gate(checkout, tmp_path_factory):
    """run(classes, name) -> GateResult: the gate of the checkout's head against its base."""
    repo, base = checkout
    root = gate_project.make_root(tmp_path_factory.mktemp("root"))
    cache = tmp_path_factory.mktemp("cache")
    path = f"{repo / 'src'}:{locations.REPOSITORY}"

    def run(classes, name):
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("CONFORMANCE_CACHE_DIR", str(cache))
            return job_gate.run_gate(job_gate.GateRequest(
                classes=tuple(classes), root=root, out=root / f"{name}.json", out_dir=f"jobs-{name}", workers=1,
                groups=("plain",), checks=("export_forward",), target="test_matrix.py",
                pytest_args=gate_project.PYTEST_ARGS, repo=str(repo), base=base, env={"PYTHONPATH": path},
                package="gate_models"))
    return run


@pytest.fixture(scope="module")
def unchanged(gate):
    return gate(["AlreadyBrokenLM", "FixedLM"], "unchanged")


def cell(result, model):
    return result.envelope["models"][model]["cells"]["export_forward"]


def test_broken_identically_at_base_and_head_is_already_failing_on_the_base_and_green(unchanged):
    assert unchanged.status == 0
    broken = cell(unchanged, "AlreadyBrokenLM")
    assert broken["verdict"] == "xfail" and broken["observed"] == "fail" and broken["base"] == "fail"
    assert broken["release_verdict"] == "fail"  # without the base, nothing lists it: red
    assert broken["gate"].startswith("already failing on the base")
    record = unchanged.envelope["merge_base"]
    assert record["already_failing"] == [["AlreadyBrokenLM", "export_forward"]]
    text = summary_text(unchanged.envelope)
    assert "already failing on the base (1): " in text and "regressions: none" in text


def test_a_cell_the_change_fixes_is_reported_fixed(unchanged):
    fixed = cell(unchanged, "FixedLM")
    assert fixed["verdict"] == "pass" and fixed["base"] == "fail"
    assert unchanged.envelope["merge_base"]["fixed"] == [["FixedLM", "export_forward"]]
    assert "fixed by this change (1): " in summary_text(unchanged.envelope)


def test_a_regression_at_head_only_is_red_and_a_changed_failure_names_the_change(gate):
    result = gate(["ChangedLM", "RegressingLM"], "regressed")
    assert result.status == 1
    regressed = cell(result, "RegressingLM")
    assert regressed["verdict"] == "fail" and regressed["base"] == "pass"
    assert "passes on the base" in regressed["gate"]
    changed = cell(result, "ChangedLM")
    assert changed["verdict"] == "fail" and changed["base"] == "fail"
    assert changed["gate"].startswith("failure changed by this change: base ")
    record = result.envelope["merge_base"]
    assert record["regressed"] == [["RegressingLM", "export_forward"]]
    assert record["changed"] == [["ChangedLM", "export_forward"]]
    assert "regressions (2): " in summary_text(result.envelope)


def test_the_base_s_envelope_is_cached_by_the_base_commit(gate, unchanged, checkout):
    again = gate(["AlreadyBrokenLM", "FixedLM"], "unchanged")
    assert unchanged.envelope["gate_run"]["base"]["cached"] is False
    assert again.envelope["gate_run"]["base"]["cached"] is True
    assert again.envelope["gate_run"]["base"]["commit"] == checkout[1]
    assert [c["verdict"] for c in map(lambda m: cell(again, m), ["AlreadyBrokenLM", "FixedLM"])] == ["xfail", "pass"]


def test_the_base_commit_of_a_three_dot_range_is_the_merge_base(checkout):
    repo, base = checkout
    assert merge_base.base_commit("HEAD~1...HEAD", repo) == base
    assert merge_base.base_commit("HEAD~1", repo) == base
    assert merge_base.base_commit("no-such-ref", repo) == ""


def test_a_class_the_pull_request_adds_is_judged_alone_and_the_base_runs_the_others(gate):
    result = gate(["AlreadyBrokenLM", "NewLM"], "adds")
    assert result.status == 0
    assert cell(result, "AlreadyBrokenLM")["verdict"] == "xfail"
    assert "base" not in cell(result, "NewLM") and cell(result, "NewLM")["verdict"] == "pass"
    base = result.envelope["gate_run"]["base"]
    assert base["not_at_base"] == ["NewLM"]
    assert [job["cells"] for job in base["jobs"]] == [1]  # the base ran AlreadyBrokenLM only
    assert result.envelope["merge_base"]["not_at_base"] == 1


def test_a_gate_of_only_new_classes_runs_nothing_at_the_base_and_a_new_failure_is_red(gate):
    result = gate(["NewBrokenLM"], "only-new")
    assert result.status == 1
    assert cell(result, "NewBrokenLM")["verdict"] == "fail"
    base = result.envelope["gate_run"]["base"]
    assert base["not_at_base"] == ["NewBrokenLM"] and base["jobs"] == []
