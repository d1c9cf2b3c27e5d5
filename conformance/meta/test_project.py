"""The project's own promises: CI runs the README's test command; fixtures and shards are sound."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conformance import fixtures, shard

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


def test_shards_cover_every_cell_once_and_keep_models_whole():
    items = [_Item(f"M{i}", c) for i in range(40) for c in ("build", "export")]
    shares = [shard.select_shard(items, f"{i}/3") for i in (1, 2, 3)]
    assert sorted(id(x) for s in shares for x in s) == sorted(id(x) for x in items)
    for share in shares:
        models = {x.callspec.params["model_name"] for x in share}
        assert all(sum(1 for x in share if x.callspec.params["model_name"] == m) == 2 for m in models)


@pytest.mark.parametrize("spec", ["0/2", "3/2", "a/b", "1"])
def test_bad_shard_spec_is_rejected(spec):
    with pytest.raises(ValueError):
        shard.parse(spec)
