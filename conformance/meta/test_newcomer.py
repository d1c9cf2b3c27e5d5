"""Meta tests of what a newcomer meets first (issue 56): `--models` takes what people type, and says what it
would have taken when it takes nothing.
"""

from __future__ import annotations

import pytest

from conformance.discover import NoMatch, select_classes
from conformance.run import options

pytestmark = pytest.mark.meta

LLAVA, NEXT = "LlavaForConditionalGeneration", "LlavaNextForConditionalGeneration"
PALI = "PaliGemmaForConditionalGeneration"
NAMES = [LLAVA, NEXT, PALI]
INDEX = {n: n for n in NAMES}
TYPES = {LLAVA: "llava", NEXT: "llava_next", PALI: "paligemma"}


def select(*patterns: str) -> list[str]:
    return select_classes(list(patterns), INDEX, NAMES, TYPES)


# --------------------------------------------------------------------------- --models


@pytest.mark.parametrize("pattern, selected", [
    ("llava", [LLAVA]),  # a model type
    ("PaliGemma", [PALI]),  # a model type, in another case
    ("paligemmaforconditionalgeneration", [PALI]),  # a class name, in any case
    ("*Llava*", [LLAVA, NEXT]),  # a glob over class names
    ("llava*", [LLAVA, NEXT]),  # ... and over model types
    ("LLAVA_NEXT", [NEXT]),
])
def test_models_takes_class_names_model_types_and_globs_in_any_case(pattern, selected):
    assert select(pattern) == selected


def test_models_names_the_pattern_that_selects_nothing_and_the_nearest_names():
    with pytest.raises(NoMatch) as raised:
        select("llava", "Lava")
    assert raised.value.pattern == "Lava" and LLAVA in raised.value.close
    assert str(raised.value).startswith("no discovered class matches 'Lava'; did you mean ")
    with pytest.raises(NoMatch, match="see `conformance list` for the names"):
        select("Zzzzzzzz")


class Source:
    """A case source of three classes, as the run sees one (index, names, rows)."""

    def index(self):
        return dict(INDEX)

    def names(self):
        return list(NAMES)

    def rows(self, names):
        return {n: {"model_type": TYPES[n]} for n in names}


class Options:
    def __init__(self, models: str):
        self.values = {"models": models, "changed_files": [], "since": "", "transformers_repo": ""}

    def getoption(self, name):
        return self.values[name]


def test_the_run_selects_model_types_and_stops_with_one_line_that_suggests_the_nearest():
    assert options.select_models(Options("llava,PALIGEMMA"), Source()) == [LLAVA, PALI]
    with pytest.raises(options.UsageError) as raised:
        options.select_models(Options("Lava"), Source())
    message = str(raised.value)
    assert "\n" not in message and message.startswith("--models: no discovered class matches 'Lava'; did you mean ")
    assert LLAVA in message


def test_explain_resolves_a_model_type_and_suggests_the_nearest_class():
    from conformance.tools import explain

    assert explain.resolve_model("llava").name == LLAVA
    assert explain.resolve_model("paligemmaforconditionalgeneration").name == PALI
    with pytest.raises(explain.ExplainError, match=f"unknown class 'Lava'; did you mean .*{LLAVA}"):
        explain.resolve_model("Lava")
    with pytest.raises(explain.ExplainError, match="selects .* classes"):
        explain.resolve_model("*Llava*")


# --------------------------------------------------------------------------- the package as the suite


def test_the_package_is_the_matrix_and_collect_only_writes_no_file(tmp_path):
    """`pytest --pyargs conformance --models X --collect-only` (README): matrix cells only, and no file in the
    working directory (no reports/ folder, no hypothesis cache of the property tests it collects)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("HYPOTHESIS")}
    done = subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "conformance", "--models", LLAVA,
                           "--collect-only", "-q", "-p", "no:cacheprovider"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    collected = [line for line in done.stdout.splitlines() if "::" in line]
    assert collected and all(line.startswith(("test_matrix.py::", "test_static_cache_property.py::"))
                             for line in collected), collected
    assert all(LLAVA in line for line in collected), collected  # the property tests follow --models too
    assert list(tmp_path.iterdir()) == []  # no reports/, no .hypothesis/: the working directory is unchanged


class Config:
    """What `plugin.wants_meta` reads of a pytest config."""

    def __init__(self, args: list[str], meta: bool = False, pyargs: bool = False):
        from conformance.run.plugin import PACKAGE

        self.args = args
        self.option = type("Option", (), {options.dest("meta"): meta, "pyargs": pyargs})()
        self.invocation_params = type("Params", (), {"dir": PACKAGE.parent})()


@pytest.mark.parametrize("args, meta, pyargs, wanted", [
    (["conformance"], False, True, False),  # the package: the matrix
    (["conformance"], False, False, False),  # the checkout's folder: the matrix
    (["conformance"], True, False, True),  # --meta
    (["conformance/meta"], False, False, True),  # a path under conformance/meta
    (["conformance/meta/test_cli.py::test_render_to_stdout_and_file"], False, False, True),
    (["conformance.meta.test_cli"], False, True, True),  # a meta module by name
])
def test_the_meta_tests_run_only_when_asked_for(args, meta, pyargs, wanted):
    from conformance.run.plugin import wants_meta

    assert wants_meta(Config(args, meta, pyargs)) is wanted


# --------------------------------------------------------------------------- the command


def test_a_reader_that_leaves_early_ends_the_command_quietly(tmp_path):
    """`conformance diff A B | head -1`: no BrokenPipeError traceback, the shell's status of a closed pipe."""
    import json
    import subprocess
    import sys

    from conformance.meta.test_report import cell, make_envelope
    from conformance.tools import cli

    old, new = make_envelope(), make_envelope()
    row = old["models"]["AlphaForConditionalGeneration"]
    for i in range(3000):  # far more changed cells than a pipe's buffer holds
        name = f"M{i}ForConditionalGeneration"
        old["models"][name] = {**row, "cells": {"build": cell("pass")}}
        new["models"][name] = {**row, "cells": {"build": cell("fail")}}
    for name, data in (("old.json", old), ("new.json", new)):
        (tmp_path / name).write_text(json.dumps(data))
    process = subprocess.Popen([sys.executable, "-m", "conformance.tools.cli", "diff", "old.json", "new.json"],
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout.readline()
    process.stdout.close()  # as `head -1` does
    assert process.wait(timeout=120) == cli.BROKEN_PIPE
    assert process.stderr.read() == ""


def help_of(capsys, *argv: str) -> str:
    from conformance.tools import cli

    with pytest.raises(SystemExit) as done:
        cli.main([*argv, "--help"])
    assert done.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse's wrapping undone


def test_the_help_texts_say_what_each_command_takes_and_does(capsys):
    main = help_of(capsys)
    assert "list, status, run, amend, publish, and gate" in main
    bench = help_of(capsys, "bench")
    assert "--suite RUN.json" in bench and "what the matrix itself costs per check" in bench
    assert "{," not in bench and ",}" not in bench  # no empty choice
    explain = help_of(capsys, "explain")
    assert "CLASS a discovered class" in explain and "CHECK a check id" in explain
    assert "1 when it does not (a known failure, xfail, included)" in explain
    assert "model types (llava)" in help_of(capsys, "plan")


# --------------------------------------------------------------------------- a one-check run's header


def test_the_header_says_the_extras_not_installed_in_one_line():
    from conformance.run.lifecycle import not_run_lines

    onnx = "needs onnxruntime, not installed: pip install x[onnx]"
    et = "needs executorch, not installed: pip install x[et]"
    lines = not_run_lines({"export_onnx": onnx, "onnx_generate": onnx, "executorch": et,
                           "compile_dynamic": "opt-in: --checks compile_dynamic runs it"})
    assert lines == [f"conformance: not run: export_onnx, onnx_generate ({onnx}); executorch ({et})",
                     "conformance: not run: compile_dynamic (opt-in: --checks compile_dynamic runs it)"]
