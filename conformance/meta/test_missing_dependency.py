"""A class that needs a package this environment lacks is not run (every cell ⬜, the install line), not a build error."""

from __future__ import annotations

import json

from conformance.cases.model_failure import missing_dependency
from conformance.meta.fake_cases import TESTS, conftest
from conformance.report import render

TIMM = ("TimmWrapperModel requires the timm library but it was not found in your environment. You can install it "
        "with pip: `pip install timm`. Please note that you may need to restart your runtime after installation.")


def test_transformers_missing_backend_error_names_the_package_and_the_install_line():
    assert missing_dependency(ImportError(TIMM)) == "needs timm (TimmWrapperModel), not installed: pip install timm"
    try:
        try:
            raise ImportError(TIMM)
        except ImportError as exc:
            raise RuntimeError("while building the vision tower") from exc
    except RuntimeError as wrapped:
        assert missing_dependency(wrapped).startswith("needs timm")
    assert missing_dependency(ImportError("No module named 'foo'")) == ""  # not transformers' own statement
    assert missing_dependency(ValueError(TIMM)) == ""


def test_its_cells_are_not_run_and_the_row_says_why(pytester):
    needs = "NeedsPackageForConditionalGeneration"
    pytester.makeconftest(conftest([needs, "OkForConditionalGeneration"]))
    pytester.makepyfile(test_matrix=TESTS)
    (pytester.path / "none.toml").write_text("")
    out = pytester.path / "matrix.json"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--matrix-out", str(out), "--expectations",
                                           str(pytester.path / "none.toml"), "-rs")
    result.assert_outcomes(passed=2, skipped=2)
    result.stdout.fnmatch_lines(["*not run: needs fakepkg (FakeTower), not installed: pip install fakepkg*"])
    envelope = json.loads(out.read_text())
    row = envelope["models"][needs]
    assert row["cells"] == {}
    assert row["not_run"] == "needs fakepkg (FakeTower), not installed: pip install fakepkg"
    assert set(envelope["models"]["OkForConditionalGeneration"]["cells"]) == {"build", "compile_prefill"}
    markdown = render.render_markdown(envelope)
    assert f"Classes not run (every cell ⬜): `{needs}`" in markdown
