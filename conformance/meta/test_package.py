"""The package is the suite: a wheel carries the data and the pytest plugin; missing data is a clear error.

`.ci/run` also installs the wheel into a fresh venv and runs
`pytest --pyargs conformance` from another directory.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conformance import locations
from conformance.run import options

pytestmark = pytest.mark.meta

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                    str(ROOT)], check=True, capture_output=True)
    (path,) = out.glob("vlm_conformance-*.whl")
    return zipfile.ZipFile(path)


def test_the_wheel_carries_every_fixture(wheel):
    names = set(wheel.namelist())
    for folder, pattern in (("models", "*.toml"), ("expectations", "*.toml"), ("bench", "*.json")):
        files = sorted((ROOT / "fixtures" / folder).glob(pattern))
        assert files, f"fixtures/{folder} is empty"
        missing = [f.name for f in files if f"conformance/data/{folder}/{f.name}" not in names]
        assert missing == [], f"the wheel lacks conformance/data/{folder}/: {missing}"
    assert "conformance/data/versions.toml" in names, "the wheel lacks conformance/data/versions.toml"


def test_the_wheel_registers_the_pytest_plugin(wheel):
    (entry_points,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    text = wheel.read(entry_points).decode()
    assert "[pytest11]\nconformance.run.plugin = conformance.run.plugin" in text
    assert "conformance = conformance.tools.cli:main" in text


def test_the_data_folder_is_the_fixtures_folder():
    assert locations.DATA.resolve() == (ROOT / "fixtures").resolve()


def test_missing_package_data_is_a_clear_usage_error(tmp_path, monkeypatch):
    monkeypatch.setattr(locations, "MODELS", tmp_path / "data" / "models")
    monkeypatch.setattr(locations, "DATA", tmp_path / "data")
    with pytest.raises(options.UsageError) as info:
        options.check_data()
    message = str(info.value)
    assert "\n" not in message and str(tmp_path / "data") in message and "reinstall" in message


def test_an_unrelated_pytest_run_is_left_alone(pytester):
    """The plugin is installed for every pytest run of the environment; outside the suite it does nothing."""
    pytester.makepyfile(test_other="def test_one():\n    assert True\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert not (pytester.path / "reports").exists()
    assert "conformance:" not in result.stdout.str()  # no header or summary line of the suite


def test_the_wheel_carries_the_html_page_assets(wheel):
    names = set(wheel.namelist())
    assert {"conformance/report/page.css", "conformance/report/page.js"} <= names
