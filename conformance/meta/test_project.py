"""The project's own promises: CI runs the README's test command; fixtures and shards are sound."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conformance.cases import model_data as fixtures
from conformance.run import shards as shard

ROOT = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    block = re.search(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    return [line for line in block.splitlines() if line and not line.startswith("#")]


def test_readme_starts_with_two_commands():
    assert len(readme_commands()) == 2


def test_ci_runs_the_readme_test_command():
    test_command = readme_commands()[1]
    assert test_command in (ROOT / ".ci" / "run").read_text().splitlines()


def test_every_model_fixture_is_valid():
    for fixture in fixtures.validate_all():
        assert fixture.about


def test_fixture_with_unknown_key_names_file_and_key(tmp_path):
    path = tmp_path / "llava.toml"
    path.write_text('about = "x"\nconfg = {}\n')
    with pytest.raises(fixtures.FixtureError, match=r"llava\.toml: unknown key 'confg'"):
        fixtures.load_model_fixture(path)


def test_fixture_for_unknown_model_type_is_an_error(tmp_path):
    path = tmp_path / "no_such_model_type.toml"
    path.write_text('about = "x"\n')
    with pytest.raises(fixtures.FixtureError, match="no model_type 'no_such_model_type'"):
        fixtures.load_model_fixture(path)


def test_fixture_for_a_model_type_of_another_supported_version_is_valid_here(tmp_path, monkeypatch):
    from conformance import versions

    path = tmp_path / "no_such_model_type.toml"
    path.write_text('about = "x"\n')
    monkeypatch.setattr(versions, "versions_with", lambda model_type: ("0.1",))  # only 0.1 has it
    assert fixtures.load_model_fixture(path).about == "x"
    here = versions.major_minor(versions.installed_version())
    monkeypatch.setattr(versions, "versions_with", lambda model_type: (here,))  # listed for this version: wrong
    with pytest.raises(fixtures.FixtureError, match="which has no such model_type"):
        fixtures.load_model_fixture(path)


def test_fixture_with_bad_toml_is_one_line(tmp_path):
    path = tmp_path / "llava.toml"
    path.write_text("about = \n")
    with pytest.raises(fixtures.FixtureError) as info:
        fixtures.load_model_fixture(path)
    assert "\n" not in str(info.value) and "llava.toml" in str(info.value)


class _Item:
    def __init__(self, model, check):
        self.nodeid = f"conformance/test_{check}.py::test_{check}[{model}]"
        self.callspec = type("C", (), {"params": {"model_name": model}})()


def _model(item) -> str:
    return item.callspec.params["model_name"]


def test_shards_cover_every_cell_once_and_keep_models_whole():
    items = [_Item(f"M{i}", c) for i in range(40) for c in ("build", "export")]
    shares = [shard.select_shard(items, f"{i}/3", group=_model) for i in (1, 2, 3)]
    assert sorted(id(x) for s in shares for x in s) == sorted(id(x) for x in items)
    for share in shares:
        models = {x.callspec.params["model_name"] for x in share}
        assert all(sum(1 for x in share if x.callspec.params["model_name"] == m) == 2 for m in models)


def test_shards_by_estimate_cover_every_cell_once_and_balance_the_seconds():
    items = [_Item(f"M{i}", c) for i in range(12) for c in ("build", "export")]
    seconds = {f"M{i}": float(s) for i, s in enumerate([40, 30, 20, 10, 10, 10, 5, 5, 5, 5, 1, 1])}
    del seconds["M11"]  # a class without an estimate counts as the median of all estimates (10 s)
    shares = [shard.select_shard(items, f"{i}/3", seconds, group=_model) for i in (1, 2, 3)]
    assert sorted(id(x) for s in shares for x in s) == sorted(id(x) for x in items)
    loads = [sum(seconds.get(m, 10.0) for m in {x.callspec.params["model_name"] for x in s}) for s in shares]
    assert max(loads) - min(loads) <= 10.0  # greedy: within one mid-sized class (here 51, 50, 50 of 151 s)
    assert shares == [shard.select_shard(items, f"{i}/3", dict(reversed(seconds.items())), group=_model) for i in (1, 2, 3)]


def test_longest_classes_run_first():
    assert shard.longest_first(["A", "B", "C", "B", "D"], {"A": 1.0, "B": 9.0, "C": 5.0}) == ["B", "C", "D", "A"]


def test_estimates_are_the_seconds_of_a_class_cells():
    envelope = {"models": {"M": {"cells": {
        "compile_prefill": {"seconds": 9.0, "metrics": {"graph_breaks": 12, "compile_seconds": 0.5}},
        "export_forward": {"seconds": 2.0, "metrics": {}}}}}}
    assert shard.estimates(envelope) == {"M": 11.0}


def test_estimates_count_only_the_columns_the_run_fills():
    envelope = {"models": {"M": {"cells": {
        "compile_prefill": {"seconds": 9.0}, "compile_prefill@inductor": {"seconds": 40.0},
        "export_forward": {"seconds": 2.0}, "export_onnx": {"seconds": 30.0}}}}}
    assert shard.estimates(envelope, ["compile_prefill", "export_forward"]) == {"M": 11.0}
    assert shard.estimates(envelope, ["compile_prefill", "export_forward"], "inductor") == {"M": 42.0}
    assert shard.estimates(envelope, ["static_cache"]) == {}  # no cell in the run's columns: no estimate


def test_a_column_never_published_splits_by_name_not_all_into_the_first_share():
    envelope = {"models": {f"M{i}": {"cells": {"build": {"seconds": 1.0}}} for i in range(12)}}
    seconds = shard.estimates(envelope, ["executorch"])
    shares = [shard.share_of(sorted(envelope["models"]), f"{i}/3", seconds) for i in (1, 2, 3)]
    assert sorted(n for s in shares for n in s) == sorted(envelope["models"])
    assert all(shares), shares  # with 0 s for every class, the least-loaded share was always the first


def test_plan_takes_the_fewest_shards_that_fit_the_budget(monkeypatch):
    monkeypatch.setattr(shard, "CELL_MARGIN", 1.0)
    seconds = {f"M{i}": 20.0 for i in range(10)}  # 200 s of cells
    names = sorted(seconds)
    assert shard.plan(names, seconds, budget=1000, workers=2, overhead=30).shards == 1
    one = shard.plan(names, seconds, budget=130, workers=2, overhead=30)  # 2 workers: 30 + 100 per shard
    assert (one.shards, one.wall_seconds, one.specs()) == (1, 130.0, ["1/1"])
    assert shard.plan(names, seconds, budget=90, workers=2, overhead=30).shards == 2  # 5 a shard: 30 + 60
    three = shard.plan(names, seconds, budget=85, workers=2, overhead=30)  # at most 4 a shard: 30 + 40
    assert (three.shards, three.wall_seconds) == (3, 70.0)
    assert shard.plan(names, seconds, budget=10, workers=2, overhead=30).shards == 10  # never more than classes
    monkeypatch.setattr(shard, "CELL_MARGIN", 1.5)  # the margin counts against the budget
    assert shard.plan(names, seconds, budget=130, workers=2, overhead=30).shards == 2


@pytest.mark.parametrize("spec", ["0/2", "3/2", "a/b", "1"])
def test_bad_shard_spec_is_rejected(spec):
    with pytest.raises(ValueError):
        shard.parse(spec)
