"""Self-tests of scripts/gpu-evidence: its CPU dry run takes every step and writes every output, so the GPU script
cannot rot while no GPU runs it; a spent budget is said, never silent; the GPU class list names real classes.

The dry run (2 classes, 4 checks, the bench at tiny real-shape sizes, cpu, bfloat16, eager) runs once for the
module with this interpreter (`--python`: no install step) and $OUT set, as the device tool would.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.report.envelope import load_envelope

pytestmark = pytest.mark.meta

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu-evidence"
DRY_CLASSES = ["LlavaOnevisionForConditionalGeneration", "Pix2StructForConditionalGeneration"]
DRY_BUDGET = 3600
DRY_CHECKS = ["build", "compile_prefill", "compile_decode", "static_cache"]
OUTPUTS = ["matrix-dry-run.json", "MATRIX-dry-run.md", "bench-dry-run.json", "bench-dry-run.md", "bench-dry-run.png",
           "gpu-evidence.log", "summary.txt"]
BENCH_MODEL_KEYS = {"model", "parameters", "source", "prefill_seconds", "prefill_tokens", "eager_tokens_per_s",
                    "compiled_tokens_per_s", "speedup", "compile_seconds", "peak_memory_mib", "sweep", "error"}


def run_script(*args: str, out: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("OUT", "PYTEST_XDIST_WORKER", "PYTEST_CURRENT_TEST")}
    if out is not None:
        env["OUT"] = str(out)
    return subprocess.run([str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("gpu-evidence")
    reports, out = base / "reports", base / "out"
    # A budget no loaded machine spends: the steps' verdicts, not the machine's speed, are under test.
    done = run_script("--dry-run", "--python", sys.executable, "--reports", str(reports), "--budget", str(DRY_BUDGET),
                      out=out, timeout=DRY_BUDGET + 120)
    return done, reports, out


def test_dry_run_takes_every_step_and_ends_complete(dry_run):
    done, reports, _ = dry_run
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    steps = dict(line.split("\t")[:2] for line in (reports / "steps.tsv").read_text().splitlines())
    assert steps == {"install": "skipped", "probe": "ok", "bench": "ok", "matrix": "ok", "render": "ok"}
    assert f"install: skipped, {sys.executable} given by --python" in done.stdout
    assert re.search(rf"done in \d+ s of {DRY_BUDGET}: complete", done.stdout)


def test_dry_run_matrix_has_every_cell_of_the_two_classes(dry_run):
    _, reports, _ = dry_run
    envelope = load_envelope(reports / "matrix-dry-run.json")
    env = envelope["environment"]
    assert (env["device"], env["dtype"], env["backend"]) == ("cpu", "bfloat16", "eager")
    assert sorted(envelope["models"]) == DRY_CLASSES
    for name in DRY_CLASSES:
        assert sorted(envelope["models"][name]["cells"]) == sorted(DRY_CHECKS)
    table = (reports / "MATRIX-dry-run.md").read_text()
    assert all(name in table for name in DRY_CLASSES)


def test_dry_run_bench_measured_both_real_shapes_at_every_point(dry_run):
    _, reports, _ = dry_run
    report = json.loads((reports / "bench-dry-run.json").read_text())
    assert report["schema"] == "vlm-conformance-bench/1"
    env = report["environment"]
    assert (env["device"], env["dtype"], env["sizes"]) == ("cpu", "bfloat16", "real")
    assert env["shapes"].endswith("fixtures/bench/shapes-tiny.json")
    shapes = json.loads((ROOT / "fixtures/bench/shapes.json").read_text())["models"]
    assert report["planned"] == {"models": list(shapes), "image_tokens": [2, 4]}
    assert report["complete"] is True and report["unmeasured"] == []
    for model in report["models"]:
        assert set(model) == BENCH_MODEL_KEYS and model["error"] == ""
        assert model["source"].startswith("shapes:llava-hf/")
        assert [p["image_tokens"] for p in model["sweep"]] == [2, 4]
        assert all(p["eager_tokens_per_s"] > 0 and p["compiled_tokens_per_s"] > 0 for p in model["sweep"])
    assert (reports / "bench-dry-run.png").read_bytes().startswith(b"\x89PNG")
    assert (reports / "bench-dry-run.md").read_text().count("| llava-") == 6  # 2 headline rows, 4 sweep rows


def test_dry_run_summary_says_what_ran(dry_run):
    done, reports, _ = dry_run
    summary = (reports / "summary.txt").read_text()
    assert summary in done.stdout
    assert "DRY RUN" in summary
    assert "not run: nothing, every cell ran" in summary
    assert "not measured: nothing" in summary
    assert "vs the CPU matrix (reports/matrix.json" in summary


def test_dry_run_copies_its_outputs_to_OUT_as_the_device_tool_brings_them_back(dry_run):
    _, _, out = dry_run
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(OUTPUTS)
    # the device tool: at most 8 files, named in letters, digits, '.', '_' and '-'
    assert len(names) <= 8 and all(re.fullmatch(r"[A-Za-z0-9._-]+", n) for n in names)


def test_a_spent_budget_is_said_and_is_not_success(tmp_path):
    """Every step skipped (the budget less the report's reserve is under a step's minimum): exit 1, each named."""
    done = run_script("--dry-run", "--python", sys.executable, "--budget", "20", "--reports", str(tmp_path),
                      timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "probe: skipped, the budget is spent" in done.stdout
    assert "bench and matrix not run: the budget is spent" in done.stdout
    summary = (tmp_path / "summary.txt").read_text()
    assert "bench not run" in summary and "matrix not run" in summary
    assert "matrix: no envelope" in summary and "bench: no report" in summary
    assert "INCOMPLETE" in done.stdout


@pytest.mark.parametrize("argv, message", [
    (["--budget", "soon"], "--budget needs a whole number of seconds"),
    (["--frobnicate"], "unknown option --frobnicate"),
])
def test_bad_options_are_one_line_and_exit_2(argv, message):
    done = run_script(*argv, timeout=30)
    assert done.returncode == 2
    assert done.stderr.strip() == f"gpu-evidence: {message}" + (", e.g. --budget 480" if "budget" in message else
                                                                " (see --help)")


def test_the_gpu_classes_are_at_least_12_discovered_classes_each_with_a_real_strategy():
    import transformers

    if transformers.__version__.split(".")[0] != "5":
        pytest.skip(f"transformers {transformers.__version__}: scripts/gpu-evidence runs transformers 5.24.0 "
                    "(constraints/gpu.txt), whose classes it names")
    from conformance.cases import strategies
    from conformance.discover import class_index

    text = SCRIPT.read_text()
    block = text[text.index("CLASSES=(") : text.index(")\n", text.index("CLASSES=("))]
    rows = [line.split(None, 2)[:2] for line in block.splitlines()[1:] if line.strip().startswith('"')]
    names, labels = [r[0].strip('"') for r in rows], [r[1].strip('"') for r in rows]
    assert len(set(names)) == len(names) >= 12
    unknown = set(names) - set(class_index())
    assert not unknown, f"scripts/gpu-evidence names classes this transformers does not have: {sorted(unknown)}"
    strategies._load()
    assert set(labels) <= set(strategies.STRATEGIES), sorted(set(labels) - set(strategies.STRATEGIES))
    assert len(set(labels)) >= 12
