"""A reproducer cut after the statement that raises (`report.repro_cut`): what follows, and what only it used,
goes; the cut is found again in a script written anew."""

from __future__ import annotations

import subprocess
import sys

from conformance.report import repro_cut, repro_verify

SCRIPT = '''"""Header."""

import os

import torch


def first():
    return torch.zeros(1)


def after():
    return os.getcwd()


LIMIT = 3
x = first()
for step in range(LIMIT):
    if step == 1:
        raise ValueError("boom")
y = after()
print(y)
'''


def test_cut_drops_the_statements_after_the_raise_and_what_only_they_used():
    shorter = repro_cut.cut(SCRIPT, 7)  # the `for` loop (after the docstring, 2 imports, 2 defs, LIMIT, x)
    assert shorter.rstrip().endswith('raise ValueError("boom")')
    assert "def after" not in shorter and "import os" not in shorter and "print(y)" not in shorter
    assert "def first" in shorter and "LIMIT = 3" in shorter and '"""Header."""' in shorter
    assert "\n\n\n\n" not in shorter


def test_cut_at_the_last_statement_is_the_script_itself():
    assert repro_cut.cut(SCRIPT, 9) == SCRIPT


def test_the_raising_statement_is_found_from_a_real_traceback(tmp_path):
    path = tmp_path / "script.py"
    path.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True)
    frames = repro_verify.tracebacks(done.stderr)[-1].frames
    assert repro_cut.raising_statement(SCRIPT, frames, path) == 7


def test_a_script_written_again_is_cut_where_its_verified_version_ends():
    verified = repro_cut.cut(SCRIPT, 7)
    again = SCRIPT.replace('"""Header."""', '"""Header, with new counts."""')
    shorter = repro_cut.recut(again, verified)
    assert shorter is not None and repro_verify.same_code(shorter, verified)
    assert repro_cut.recut(again.replace("boom", "bang"), verified) is None  # the code changed: verify it anew
