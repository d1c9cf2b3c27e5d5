"""`findings --verify --keep-verified`: a verification resumed in the same venv keeps the verdict of a script whose
code is unchanged (its header docstring, comments and layout aside), and verifies the others."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from conformance.report import repro_verify

pytestmark = pytest.mark.meta


def test_an_unchanged_script_keeps_its_verdict_and_a_changed_or_new_one_is_verified_again(tmp_path):
    (tmp_path / "a.py").write_text("raise ValueError('a')\n")
    (tmp_path / "b.py").write_text("raise ValueError('b')\n")
    verdict = {"verified": True, "why": "", "observed": {"kind": "exception"}, "seconds": 1.5}
    (tmp_path / "index.json").write_text(json.dumps({"groups": [
        {"group": "a", "script": "a.py", **verdict}, {"group": "b", "script": "b.py", **verdict},
        {"group": "c", "script": "c.py", "verified": None}]}))
    previous = repro_verify.previous_verdicts(tmp_path)
    assert set(previous) == {"a", "b"}  # c was never verified
    (tmp_path / "b.py").write_text("raise ValueError('b, shorter')\n")  # written again, other text
    (tmp_path / "c.py").write_text("raise ValueError('c')\n")
    entries = [SimpleNamespace(group=g, script=f"{g}.py", verified=None, why="", observed={}, seconds=0.0)
               for g in "abc"] + [SimpleNamespace(group="d", script="", verified=None)]
    left = repro_verify.keep_verdicts(entries, tmp_path, previous)
    assert [e.group for e in left] == ["b", "c"]
    assert (entries[0].verified, entries[0].seconds, entries[0].observed) == (True, 1.5, {"kind": "exception"})
    assert entries[1].verified is None


def test_a_script_whose_header_alone_changed_keeps_its_verdict_and_one_whose_code_changed_does_not():
    header = '"""Shared by 1 class(es), 2 cell(s)."""\n\nimport torch\n\nx = torch.ones(2)  # the input\n'
    assert repro_verify.same_code(header, header.replace("1 class(es), 2", "4 class(es), 8").replace(
        "  # the input", ""))
    assert not repro_verify.same_code(header, header.replace("ones(2)", "ones(3)"))
    assert not repro_verify.same_code(header, header.replace('"""Shared', '"""Shared by', 1) + "y = 1\n")
    assert repro_verify.same_code("def broken(:\n", "def broken(:\n")  # unparsable: its text decides
    assert not repro_verify.same_code("def broken(:\n", "def broken( :\n")


def test_a_folder_without_a_readable_index_keeps_nothing(tmp_path):
    assert repro_verify.previous_verdicts(tmp_path) == {}
    (tmp_path / "index.json").write_text("{not json")
    assert repro_verify.previous_verdicts(tmp_path) == {}
