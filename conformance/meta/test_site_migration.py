"""Fingerprints recorded under the old site rule are renamed to today's (`expectations --migrate-sites`), nothing else.

A recompile guard recorded as ``cache_utils:update`` (5.24's publisher) or ``transformers.cache_utils:update``
(5.23's) becomes today's ``transformers.cache_utils:<Class>.update``, its qualname read at the line the cell's reason
quotes; a site that is no weaker form of today's (another failure, another version's line) stays as it was.
"""

from __future__ import annotations

import json

import pytest

from conformance.gate.sites import migrate, migrate_file, renamed
from conformance.meta.test_site_forms import EXPECTED, LINE
from conformance.report import io
from conformance.tools import cli

pytestmark = pytest.mark.meta

GUARD = "kwargs['cache'].layers[#].cumulative_length_int == #"
REASON = (f"decode step recompiled after the first step; failed guard: kwargs['cache'].layers[0].cumulative_length_int"
          f" == 16 (at transformers/cache_utils.py:{LINE} in update)")
TOML = f'''[conditions]
device = "cpu"

[[cell]]
model = "AyaVisionForConditionalGeneration"
check = "compile_decode"
verdict = "fail"
reason = "{REASON}"
[cell.fingerprint]
kind = "recompile"
recompiles = 1
guard = "{GUARD} @ cache_utils:update"
[[cell.when]]
backend = "inductor"
reason = "{REASON}"

[[cell]]
model = "Gemma3ForConditionalGeneration"
check = "compile_decode"
verdict = "fail"
reason = "{REASON}"
[cell.fingerprint]
kind = "recompile"
recompiles = 1
guard = "{GUARD} @ transformers.cache_utils:update"

[[cell]]
model = "Other"
check = "compile_decode"
verdict = "fail"
reason = "{REASON.replace(' in update)', ' in forward)')}"
[cell.fingerprint]
kind = "recompile"
recompiles = 1
guard = "{GUARD} @ cache_utils:forward"
'''


def test_a_guard_is_renamed_by_the_line_its_reason_quotes():
    location = ("transformers/cache_utils.py", LINE, "update")
    assert renamed(f"{GUARD} @ cache_utils:update", location) == f"{GUARD} @ {EXPECTED}"
    assert renamed(f"{GUARD} @ transformers.cache_utils:update", location) == f"{GUARD} @ {EXPECTED}"
    assert renamed(f"{GUARD} @ {EXPECTED}", location) == f"{GUARD} @ {EXPECTED}"
    assert renamed(f"{GUARD} @ cache_utils:forward", location) == f"{GUARD} @ cache_utils:forward"  # another failure
    assert renamed(f"{GUARD} @ cache_utils:update", ("transformers/nowhere.py", 3, "update")) == \
        f"{GUARD} @ cache_utils:update"  # no file to read: left for the env that has it
    assert renamed("cache_utils:update") == "transformers.cache_utils:update"  # no line: the module only
    assert renamed("torch:_assert") == "torch:_assert" and renamed("<inductor generated code>:call") == \
        "<inductor generated code>:call"


def test_an_expectations_file_changes_only_in_its_renamed_sites(tmp_path):
    path = tmp_path / "5.24.toml"
    path.write_text(TOML)
    assert migrate_file(path) == [(f"{GUARD} @ cache_utils:update", f"{GUARD} @ {EXPECTED}"),
                                  (f"{GUARD} @ transformers.cache_utils:update", f"{GUARD} @ {EXPECTED}")]
    assert path.read_text() == TOML  # not written without `write`
    migrate_file(path, write=True)
    old, new = TOML.splitlines(), path.read_text().splitlines()
    changed = [(a, b) for a, b in zip(old, new) if a != b]
    assert len(old) == len(new) and [b for _, b in changed] == [f'guard = "{GUARD} @ {EXPECTED}"'] * 2
    assert migrate_file(path) == []  # once is enough


def test_an_envelope_s_cells_are_renamed_and_written_as_run_files_are(tmp_path):
    cell = {"verdict": "xfail", "reason": REASON, "fingerprint": {
        "guard": f"{GUARD} @ cache_utils:update", "kind": "recompile", "recompiles": 1}}
    envelope = {"schema": "vlm-conformance/1", "models": {"M": {"cells": {
        "compile_decode": cell, "compile_prefill": {"verdict": "xfail", "reason": "x", "fingerprint": {
            "kind": "graph_break", "sites": {"what @ cache_utils:update": 2}, "where": "cache_utils:update"}}}}}}
    path = tmp_path / "matrix.json"
    path.write_text(io.json_text(envelope))
    assert len(migrate_file(path, write=True)) == 3
    cells = json.loads(path.read_text())["models"]["M"]["cells"]
    assert cells["compile_decode"]["fingerprint"]["guard"] == f"{GUARD} @ {EXPECTED}"
    assert cells["compile_prefill"]["fingerprint"]["sites"] == {"what @ transformers.cache_utils:update": 2}
    assert cells["compile_prefill"]["fingerprint"]["where"] == "transformers.cache_utils:update"
    assert path.read_text() == io.json_text(json.loads(path.read_text())) and migrate(json.loads(path.read_text())) == []


def test_the_command_says_what_it_renames_and_a_dry_run_writes_nothing(tmp_path, capsys):
    path = tmp_path / "5.24.toml"
    path.write_text(TOML)
    assert cli.main(["expectations", "--migrate-sites", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"{path}: 2 site(s) to rename" in out and f"1 x {GUARD} @ cache_utils:update -> {GUARD} @ {EXPECTED}" in out
    assert path.read_text() == TOML
    assert cli.main(["expectations", "--migrate-sites", str(path)]) == 0
    assert f"{path}: 2 site(s) renamed" in capsys.readouterr().out and path.read_text() != TOML
