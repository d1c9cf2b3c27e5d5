"""Upstream links have one home: a thread's title and related threads in fixtures/upstream.toml, which cells it is
about in each cell's expectation `link`; a findings group lists the threads its cells link."""

from __future__ import annotations

import tomllib
from types import SimpleNamespace

import pytest

from conformance import locations
from conformance.report import upstream_threads
from conformance.report.upstream_threads import Thread, UpstreamFileError, group_threads

pytestmark = pytest.mark.meta


def _expectation_links() -> dict[str, set[str]]:
    """url -> the expectations files (names) whose entries or overrides link it."""
    found: dict[str, set[str]] = {}
    for path in sorted(locations.EXPECTATIONS.glob("*.toml")):
        for entry in tomllib.loads(path.read_text()).get("cell", []):
            for fields in (entry, *entry.get("when", [])):
                if fields.get("link"):
                    found.setdefault(fields["link"], set()).add(path.name)
    return found


def test_every_link_of_an_expectation_is_a_thread_with_a_title():
    threads = upstream_threads.threads()
    missing = {url: files for url, files in _expectation_links().items() if url not in threads}
    assert not missing, f"add a [[thread]] with its title to fixtures/upstream.toml for {missing}"


def test_every_thread_is_linked_by_a_cell_or_related_to_one_and_its_relations_are_listed():
    threads = upstream_threads.threads()
    linked = set(_expectation_links())
    related = {r for url in linked if url in threads for r in threads[url].related}
    assert not set(threads) - linked - related, "a thread no cell links, directly or as related"
    assert all(r in threads for t in threads.values() for r in t.related)


def test_a_group_lists_its_cells_threads_most_linked_first_then_each_ones_related(monkeypatch):
    monkeypatch.setattr(upstream_threads, "threads", lambda: {
        "u/a": Thread("u/a", "A", ("u/r",)), "u/b": Thread("u/b", "B"), "u/r": Thread("u/r", "R")})
    cells = [SimpleNamespace(model=m, check=c) for m, c in (("M", "x"), ("M", "y"), ("N", "x"), ("N", "z"))]
    links = {("M", "x"): "u/b", ("M", "y"): "u/a", ("N", "x"): "u/b", ("N", "z"): "u/unlisted"}
    assert group_threads(cells, links) == [("u/b", "B"), ("u/a", "A"), ("u/r", "R"), ("u/unlisted", "u/unlisted")]
    assert group_threads(cells, {}) == []


def test_a_corrupt_file_is_one_line_naming_it(tmp_path, monkeypatch):
    bad = tmp_path / "upstream.toml"
    bad.write_text("[[thread]]\nurl = 'u'\n")
    monkeypatch.setattr(upstream_threads, "PATH", bad)
    upstream_threads.threads.cache_clear()
    try:
        with pytest.raises(UpstreamFileError, match="upstream.toml: \\[\\[thread\\]\\] number 1 needs a url and a title"):
            upstream_threads.threads()
        bad.write_text("[[thread]\n")
        upstream_threads.threads.cache_clear()
        with pytest.raises(UpstreamFileError, match="not readable TOML"):
            upstream_threads.threads()
    finally:
        upstream_threads.threads.cache_clear()
