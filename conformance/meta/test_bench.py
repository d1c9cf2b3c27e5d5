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
    with pytest.raises(SystemExit):
        bench.main(argv)
    assert message in capsys.readouterr().err


def test_unknown_model_is_one_clear_line(capsys, tmp_path):
    assert bench.main(["--models", "NoSuchModel*", "--out", str(tmp_path / "b")]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == "conformance bench: --models: nothing matches 'NoSuchModel*'"


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
    assert all(set(p) == POINT_KEYS for p in model["sweep"])
    assert all(isinstance(p["speedup"], float) for p in model["sweep"])
    assert out.with_suffix(".md").read_text().count("| LlavaForConditionalGeneration |") == 3
    assert out.with_suffix(".png").read_bytes().startswith(b"\x89PNG")
