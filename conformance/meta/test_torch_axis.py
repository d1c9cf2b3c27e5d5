"""The torch axis (issue 57): a version's matrix on another torch is judged by the same expectations file, whose
entries condition on `torch` (major.minor) where a failure differs, and `expectations --update` from that run's
file writes exactly that."""

from __future__ import annotations

import pytest

from conformance.fingerprints import Fingerprint
from conformance.gate import expectations as gate
from conformance.gate.update import update_expectations
from conformance.meta.test_gate import cell, write_run

pytestmark = pytest.mark.meta

FP = {"kind": "exception", "error": "ValueError", "where": "m:f"}
OTHER = {"kind": "graph_break", "error": "Unsupported", "where": "torch._dynamo.variables:f"}
TORCH_214 = {"torch": "2.14.1+cu130"}


def listed(path, cells: dict) -> None:
    path.write_text(gate.dumps(gate.ExpectationsFile(path, dict(gate.DEFAULT_CONDITIONS), {
        (model, "build"): gate.Expectation(model, "build", "fail", reason, "", Fingerprint.from_data(fp))
        for model, (reason, fp) in cells.items()})))


def applied(path, torch: str) -> dict:
    found = gate.load_for_run(gate.run_conditions("cpu", "float32", "eager", torch), path).cells
    return {model: (e.reason, e.fingerprint.to_data() if e.fingerprint else None) for (model, _), e in found.items()}


def test_a_run_on_another_torch_conditions_only_what_differs_on_it(tmp_path):
    file = tmp_path / "5.24.toml"
    listed(file, {"Same": ("fails on every torch", FP), "Moved": ("fails here on 2.13", FP)})
    run = write_run(tmp_path / "torch214.json", {
        "Same": {"build": cell("xfail", "fails on every torch", fingerprint=FP, observed="fail")},
        "Moved": {"build": cell("fail", "breaks in dynamo on 2.14", fingerprint=OTHER, observed="fail")},
        "New": {"build": cell("fail", "breaks on 2.14 only", fingerprint=OTHER)},
    }, env=TORCH_214)
    update_expectations(run, file)
    text = file.read_text()
    assert 'conditions = { torch = "2.14" }' in text  # New: on 2.14 only
    assert '[[cell.when]]\ntorch = "2.14"' in text  # Moved: its 2.14 failure under a [[cell.when]]
    assert applied(file, "2.13.0") == {"Same": ("fails on every torch", FP), "Moved": ("fails here on 2.13", FP)}
    assert applied(file, "2.14.1") == {"Same": ("fails on every torch", FP),
                                       "Moved": ("breaks in dynamo on 2.14", OTHER),
                                       "New": ("breaks on 2.14 only", OTHER)}


def test_a_cell_fixed_by_the_newer_torch_is_refused_with_what_to_write(tmp_path):
    """The grammar has no "every torch but 2.14": the update says so in one line, naming the entry, and a person
    writes the torch the failure holds for (then updates again)."""
    file = tmp_path / "5.24.toml"
    listed(file, {"Fixed": ("fails on 2.13", FP)})
    run = write_run(tmp_path / "torch214.json", {"Fixed": {"build": cell("xpass", "passes", observed="pass")}},
                    env=TORCH_214)
    with pytest.raises(gate.ExpectationsError, match=r"Fixed.*every torch but 2\.14.*list the torch values") as info:
        update_expectations(run, file)
    assert "\n" not in str(info.value)
    text = file.read_text().replace('reason = "fails on 2.13"', 'reason = "fails on 2.13"\nconditions = { torch = '
                                                                 '"2.13" }')
    file.write_text(text)
    update_expectations(run, file)
    assert applied(file, "2.13.0") == {"Fixed": ("fails on 2.13", FP)} and applied(file, "2.14.1") == {}


def test_a_torch_axis_is_published_in_its_folder_its_page_beside_the_suite_s_torch(tmp_path):
    import json
    from pathlib import Path

    from conformance import versions
    from conformance.tools import publishing

    axis = next((v for v in versions.supported() if v.torch), None)
    if axis is None:
        pytest.skip("fixtures/versions.toml lists no torch axis")
    runs = {torch: json.loads(write_run(tmp_path / f"{torch}.json", {"A": {"build": cell("pass")}},
                                        version=axis.transformers, env={"torch": torch}).read_text())
            for torch in ("2.13.0+cpu", axis.torch + "+cu130")}
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "matrix.json").write_text(json.dumps(runs["2.13.0+cpu"]))
    files = publishing.published_files(runs[axis.torch + "+cu130"], tmp_path)
    folder = tmp_path / "reports" / axis.env
    assert sorted(files) == sorted(folder / name for name in ("matrix.json", "MATRIX.md", "matrix.html"))
    html = files[folder / "matrix.html"]
    assert f"torch {axis.torch}+cu130" in html and "torch 2.13.0+cpu" in html  # one label per torch
    assert publishing.beside_path(runs["2.13.0+cpu"]) is None
    assert publishing.beside_path(runs[axis.torch + "+cu130"]) == Path("reports/matrix.json")


def test_a_dtype_run_widens_an_entry_with_a_torch_override_where_it_was_seen(tmp_path):
    """A float32 entry with a ``torch = "2.14"`` override, failing the same way in a bfloat16 run on 2.13: merging
    the points dtype first would say "every torch but 2.13" in float32, which no table can; the update writes
    float32 on every torch and bfloat16 on 2.13 (the torch it was seen on), the override kept."""
    file = tmp_path / "5.24.toml"
    listed(file, {"Both": ("fails in float32", FP)})
    file.write_text(file.read_text() + '[[cell.when]]\ntorch = "2.14"\nreason = "other on 2.14"\n'
                    '[cell.when.fingerprint]\nkind = "graph_break"\nwhere = "torch._dynamo.variables:f"\n'
                    'error = "Unsupported"\n')
    run = write_run(tmp_path / "bf16.json", {
        "Both": {"build": cell("xfail", "fails in float32", fingerprint=FP, observed="fail")}},
        env={"dtype": "bfloat16", "torch": "2.13.0+cpu"})
    update_expectations(run, file)

    def seen(dtype, torch):
        found = gate.load_for_run(gate.run_conditions("cpu", dtype, "eager", torch), file).cells
        return {model: e.reason for (model, _), e in found.items()}

    assert seen("float32", "2.13.0") == {"Both": "fails in float32"} == seen("bfloat16", "2.13.0")
    assert seen("float32", "2.14.1") == {"Both": "other on 2.14"}
    assert seen("bfloat16", "2.14.1") == {}  # not seen there: not claimed
