"""The version matrix as data (fixtures/versions.toml): it matches tox, the constraints and the expectations files,
and its per-version facts hold on the installed transformers (CI runs these tests on every version it lists)."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

import pytest

from conformance import locations, versions
from conformance.cases import model_data
from conformance.tools import cli

ROOT = Path(__file__).resolve().parents[2]


def _installed_or_skip() -> versions.Version:
    entry = versions.installed()
    if entry is None:
        pytest.skip(f"transformers {versions.installed_version()} is not a supported version "
                    f"(fixtures/versions.toml): its per-version data is not checked here")
    return entry


def test_every_supported_version_is_a_tox_env_pinned_by_its_constraints():
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    envs = [e.strip() for e in tox["tox"]["env_list"].split(",")]
    for entry in versions.supported():
        # A version CI leaves out (a torch axis on a CUDA build of gigabytes) is no default env either.
        assert (entry.env in envs) == entry.ci, f"tox.ini env_list and {entry.env}'s ci = {entry.ci} disagree"
        if entry.torch:
            assert re.search(rf"^torch=={re.escape(entry.torch)}$", (ROOT / "constraints" / entry.constraints)
                             .read_text(), re.M), entry.constraints
        pins = (ROOT / "constraints" / entry.constraints).read_text()
        assert re.search(rf"^transformers=={re.escape(entry.transformers)}$", pins, re.M), entry.constraints
        assert f"{entry.env}: -r {{tox_root}}/constraints/{entry.constraints}" in tox["testenv"]["deps"]


def test_every_supported_version_has_its_expectations_file():
    from conformance.gate.expectations import path_for_version

    for entry in versions.supported():
        assert path_for_version(entry.transformers).exists(), f"no {path_for_version(entry.transformers).name}"


def test_the_installed_transformers_is_the_pinned_patch_release():
    entry = _installed_or_skip()
    assert versions.installed_version() == entry.transformers


def test_the_image_text_classes_are_as_many_as_the_version_data_says():
    from conformance.discover import discover

    entry = _installed_or_skip()
    assert sum(info.is_image_text for info in discover() if info.profile is None) == entry.image_text_classes


def test_fixture_model_types_missing_here_are_listed_exactly():
    """Known here <=> not listed, or listed with this version: the data is exact on every supported version."""
    here = _installed_or_skip().minor
    for path in sorted(locations.MODELS.glob("*.toml")):
        listed = versions.versions_with(path.stem)
        expected = listed is None or here in listed
        assert model_data.installed_model_type(path.stem) == expected, (path.name, listed)


def test_every_listed_model_type_has_a_fixture_and_a_supported_version_without_it():
    minors = {v.minor for v in versions.supported()}
    for model_type, listed in versions.listed_model_types().items():
        assert (locations.MODELS / f"{model_type}.toml").exists(), model_type
        assert set(listed) < minors, f"{model_type}: every supported version has it; remove it from the list"


def test_the_ci_classes_are_discovered_here():
    from conformance.discover import by_name

    entry = _installed_or_skip()
    missing = [name for name in versions.ci_models() if name not in by_name()]
    assert not missing, f"[ci] models names classes transformers {entry.transformers} lacks: {missing}"


def test_the_gate_s_ci_classes_cover_every_strategy_and_kind_of_the_published_matrix():
    """CI gates `:ci` on the gate's version: a class of every (input strategy, model kind) pair that the published
    matrix has (a new strategy, or a strategy on a new kind of model, must get a class in [ci] gate)."""
    import json

    if not locations.PUBLISHED_MATRIX.exists():
        pytest.skip("an installed package holds no published matrix (reports/matrix.json is the checkout's)")
    rows = json.loads(locations.PUBLISHED_MATRIX.read_text())["models"]
    pair = {name: ((row.get("tiny") or {}).get("strategy", "?"), row.get("kind")) for name, row in rows.items()}
    chosen = set(versions.gate_ci_models())
    assert chosen >= set(versions.ci_models()), "[ci] gate must hold the other versions' [ci] models"
    assert chosen <= set(pair), f"[ci] gate names classes the published matrix lacks: {sorted(chosen - set(pair))}"
    missed = sorted({pair[n] for n in pair} - {pair[n] for n in chosen}, key=str)
    assert not missed, f"[ci] gate has no class of (strategy, kind) {missed}: add the cheapest of each"


def test_at_ci_selects_the_gate_s_ci_classes_and_an_unknown_selection_names_the_known_ones():
    from conformance.discover import select_classes

    names = sorted(versions.gate_ci_models()) + ["SomeOtherForConditionalGeneration"]
    index = {n: n for n in names}
    assert select_classes([":ci"], index, names) == sorted(versions.gate_ci_models())
    with pytest.raises(LookupError, match=":cj .the named selections are :ci"):
        select_classes([":cj"], index, names)


def test_the_readme_s_test_command_gates_the_ci_classes():
    readme = (ROOT / "README.md").read_text()
    assert "-m pytest conformance -n 2 --dist loadgroup --models :ci" in readme


def test_the_command_lists_the_versions_and_what_ci_runs(capsys):
    assert cli.main(["versions", "--ci"]) == 0
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    others = [v for v in versions.supported() if not v.is_gate and v.ci]
    assert [(env, constraints) for env, constraints, _ in lines] == [(v.env, v.constraints) for v in others]
    assert all(models.split(",") == list(versions.ci_models()) for *_, models in lines)
    assert cli.main(["versions"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(versions.supported())


def test_ci_runs_the_version_matrix_from_the_data():
    script = (ROOT / ".ci" / "run").read_text()
    assert "conformance versions --ci" in script and '--models "$models,$sample"' in script


GOOD = ('[[version]]\ntransformers = "5.24.0"\nenv = "gate"\nconstraints = "gate.txt"\nimage_text_classes = 1\n'
        '[ci]\nmodels = ["LlavaForConditionalGeneration"]\ngate = ["LlavaForConditionalGeneration"]\n')


@pytest.mark.parametrize("text, message", [
    (GOOD + '[model_types]\nfoo = ["4.1"]\n', r"model_types\.foo must list the supported versions"),
    ('[[version]]\ntransformers = "5.24.0"\n', r"version #1: 'constraints' is missing or unknown"),
    (GOOD.replace('"gate"', '"tf524"'), r"the newest \[\[version\]\] must be the one with env = 'gate'"),
    (GOOD.replace("models", "classes"), r"\[ci\] must hold models"),
    (GOOD + "[renamed_config_keys]\na = 1\n", r"renamed_config_keys\.a must be the key's other name"),
    ("version = [", "not valid TOML"),
    (GOOD + GOOD.split("[ci]")[0], r"two \[\[version\]\] entries are 5\.24; give the torch axis its torch"),
    (GOOD + GOOD.split("[ci]")[0].replace("5.24.0", "5.23.0").replace('"gate"', '"t"') + 'torch = "2.14.1"\n',
     r"t: a torch axis of transformers 5\.23\.0, which has no entry on the suite's own torch"),
    (GOOD.replace("image_text_classes = 1", "image_text_classes = 1\nci = 0"), r"torch must be a release"),
])
def test_a_bad_versions_file_is_one_line(tmp_path, text, message):
    path = tmp_path / "versions.toml"
    path.write_text(text)
    with pytest.raises(versions.VersionsError, match=message) as info:
        versions.load(path)
    assert "\n" not in str(info.value)


def test_the_good_file_parses():
    path_data = versions.load(locations.VERSIONS)
    assert path_data.versions[0].is_gate and versions.renamed_config_keys()["rope_parameters"] == "rope_scaling"


TORCH_AXIS = GOOD + ('[[version]]\ntransformers = "5.24.0"\ntorch = "2.14.1"\nenv = "torch214"\n'
                     'constraints = "torch214.txt"\nimage_text_classes = 1\nci = false\n')


def test_a_torch_axis_is_its_own_version_of_the_same_transformers(tmp_path, monkeypatch):
    """The gate's entry sorts first; a run's torch picks its entry (else the one on the suite's own torch), and the
    version's key says which torch where it is not the suite's."""
    path = tmp_path / "versions.toml"
    path.write_text(TORCH_AXIS)
    data = versions.load(path)
    assert [(v.env, v.key, v.ci) for v in data.versions] == [("gate", "5.24", True),
                                                             ("torch214", "5.24 · torch 2.14", False)]
    monkeypatch.setattr(versions, "supported", lambda: data.versions)
    assert versions.of_environment("5.24.0", "2.14.1+cu130").env == "torch214"
    assert versions.of_environment("5.24.0", "2.13.0+cpu").env == "gate"
    assert versions.of_environment("5.24.0", "2.11.0").env == "gate"
    assert versions.of_environment("5.23.0", "2.14.1") is None


def test_a_torch_axis_run_is_published_in_its_own_folder(monkeypatch):
    from conformance.tools import publishing

    def run(torch):
        return {"environment": {"transformers": "5.24.0", "torch": torch}}

    axis = next((v for v in versions.supported() if v.torch), None)
    if axis is None:
        pytest.skip("fixtures/versions.toml lists no torch axis")
    assert publishing.version_folder(run(axis.torch + "+cu130")) == Path("reports") / axis.env
    assert publishing.version_folder(run("2.13.0+cpu")) is None  # the gate's: reports/matrix.json
