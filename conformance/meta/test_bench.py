"""Self-tests of `conformance bench`: output format and option errors (never timings)."""

from __future__ import annotations

import json

import pytest

from conformance.tools import bench

pytestmark = pytest.mark.meta

MODEL_KEYS = {"model", "parameters", "source", "prefill_seconds", "prefill_tokens", "eager_tokens_per_s",
              "compiled_tokens_per_s", "speedup", "compile_seconds", "peak_memory_mib", "sweep", "error"}
POINT_KEYS = {"image_tokens", "context", "eager_tokens_per_s", "compiled_tokens_per_s", "speedup"}


def _synthetic_report():
    point = bench.Point(image_tokens=16, context=24, eager_tokens_per_s=10.0, compiled_tokens_per_s=20.0, speedup=2.0)
    good = bench.ModelResult(model="AForConditionalGeneration", parameters=10, source="auto", sweep=[point])
    broken = bench.ModelResult(model="BForConditionalGeneration", parameters=0, source="", error="ValueError: no")
    env = {"device": "cpu", "dtype": "float32", "torch": "t", "transformers": "x", "backend": "eager",
           "mode": "default", "threads": 1, "sizes": "tiny", "new_tokens": 2, "repeats": 1}
    return bench.envelope([good, broken], env)


def test_markdown_has_one_row_per_model_and_per_sweep_point(tmp_path):
    report = _synthetic_report()
    text = bench.markdown(report)
    assert "| AForConditionalGeneration | 10 |" in text
    assert "| BForConditionalGeneration | | | | | error: ValueError: no |" in text
    assert "| AForConditionalGeneration | 16 | 24 | 10.0 | 20.0 | 2.00x |" in text
    paths = bench.write_outputs(report, tmp_path / "bench")
    assert [p.suffix for p in paths] == [".json", ".md", ".png"]
    assert paths[2].read_bytes().startswith(b"\x89PNG")
    assert json.loads(paths[0].read_text())["schema"] == bench.SCHEMA


@pytest.mark.parametrize("argv, message", [
    (["--image-tokens", "a,b"], "comma-separated list of integers"),
    (["--image-tokens", "0"], "positive count"),
])
def test_bad_options_are_one_clear_line(argv, message, capsys):
    assert bench.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_unknown_model_is_one_clear_line(capsys, tmp_path):
    assert bench.main(["--models", "NoSuchModel*", "--out", str(tmp_path / "b")]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "conformance bench: --models: no discovered class matches 'NoSuchModel*'; see `conformance list` for the names")


def test_ci_sized_run_writes_the_three_outputs(tmp_path):
    """One tiny model, two sweep points, two tokens, the eager dynamo backend: seconds."""
    out = tmp_path / "bench"
    code = bench.main(["--models", "LlavaForConditionalGeneration", "--device", "cpu", "--backend", "eager",
                       "--image-tokens", "2,4", "--new-tokens", "2", "--repeats", "1", "--threads", "1",
                       "--out", str(out)])
    assert code == 0
    report = json.loads(out.with_suffix(".json").read_text())
    assert report["schema"] == bench.SCHEMA
    assert report["environment"]["device"] == "cpu" and report["environment"]["sizes"] == "tiny"
    (model,) = report["models"]
    assert set(model) == MODEL_KEYS and model["error"] == ""
    assert [p["image_tokens"] for p in model["sweep"]] == [2, 4]
    assert report["planned"] == {"models": ["LlavaForConditionalGeneration"], "image_tokens": [2, 4]}
    assert report["complete"] is True and report["unmeasured"] == []
    assert all(set(p) == POINT_KEYS for p in model["sweep"])
    assert all(isinstance(p["speedup"], float) for p in model["sweep"])
    assert out.with_suffix(".md").read_text().count("| LlavaForConditionalGeneration |") == 3
    assert out.with_suffix(".png").read_bytes().startswith(b"\x89PNG")


def test_an_interrupted_run_keeps_what_it_measured_and_says_what_it_did_not(tmp_path, monkeypatch, capsys):
    """Ctrl-C (or a time limit's SIGINT) after one of two points of the first model: both kept and said."""
    def one_point_then_interrupted(name, args, device, dtype, clock, progress):
        result = bench.ModelResult(model=name, parameters=10, source="synthetic")
        progress(result)
        result.sweep.append(bench.Point(image_tokens=2, context=10, eager_tokens_per_s=1.0,
                                        compiled_tokens_per_s=2.0, speedup=2.0))
        progress(result)
        raise KeyboardInterrupt

    monkeypatch.setattr(bench, "select", lambda models, sizes, shapes: ["A", "B"])
    monkeypatch.setattr(bench, "bench_model", one_point_then_interrupted)
    out = tmp_path / "bench"
    assert bench.main(["--device", "cpu", "--image-tokens", "2,4", "--out", str(out)]) == 130
    report = json.loads(out.with_suffix(".json").read_text())
    assert report["complete"] is False
    assert report["unmeasured"] == ["A: 4 image tokens", "B: not started"]
    (model,) = report["models"]
    assert model["error"] == "interrupted after 1 of 2 sweep points" and len(model["sweep"]) == 1
    text = out.with_suffix(".md").read_text()
    assert "**Incomplete run**, not measured: A: 4 image tokens; B: not started." in text
    assert "| A (interrupted after 1 of 2 sweep points) | 10 |" in text
    assert "not measured: A: 4 image tokens; B: not started" in capsys.readouterr().err
