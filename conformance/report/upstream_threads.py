"""The upstream threads found for failures, and the links of a findings group.

Contract: a thread (an upstream issue or pull request) lives once, in
`fixtures/upstream.toml`: its url, its title, and the urls of the threads
related to it. Which cells a thread is about is said once too, by the `link`
of each cell's expectation. `group_threads(cells, cell_links)` is the list of
(url, title) of a findings group: the threads its cells link (`cell_links`:
(class, check) -> url, from the expectations that apply to the runs), most
linked first, each followed by its related threads, each url once; [] for a
group whose cells link none. `threads()` reads the file (url -> Thread);
`UpstreamFileError` is one line naming the file and the fix when it cannot be
read. A url the file does not list keeps the url as its title (a meta test
keeps every expectation's link listed). Torch-free.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import lru_cache

from conformance import locations

PATH = locations.DATA / "upstream.toml"


class UpstreamFileError(ValueError):
    """fixtures/upstream.toml cannot be read; the message is one line for a person."""


@dataclass(frozen=True)
class Thread:
    url: str
    title: str
    related: tuple[str, ...] = field(default=())


@lru_cache(maxsize=1)
def threads() -> dict[str, Thread]:
    shown = locations.shown(PATH)
    try:
        data = tomllib.loads(PATH.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UpstreamFileError(f"{shown}: not readable TOML ({exc}); fix the file or restore it "
                                "(git checkout -- fixtures/upstream.toml)") from None
    found: dict[str, Thread] = {}
    for index, entry in enumerate(data.get("thread", []), 1):
        if not isinstance(entry, dict) or not entry.get("url") or not entry.get("title"):
            raise UpstreamFileError(f"{shown}: [[thread]] number {index} needs a url and a title")
        if entry["url"] in found:
            raise UpstreamFileError(f"{shown}: {entry['url']} is listed twice; keep one [[thread]] for it")
        found[entry["url"]] = Thread(entry["url"], entry["title"], tuple(entry.get("related", ())))
    return found


def title_of(url: str) -> str:
    thread = threads().get(url)
    return thread.title if thread else url


def group_threads(cells, cell_links: dict[tuple[str, str], str]) -> list[tuple[str, str]]:
    """(url, title) of the threads a group's cells (each with .model and .check) link, most linked first."""
    counts: dict[str, int] = {}
    for cell in cells:
        url = cell_links.get((cell.model, cell.check), "")
        if url:
            counts[url] = counts.get(url, 0) + 1
    ordered: list[str] = []
    for url in sorted(counts, key=lambda u: (-counts[u], u)):
        thread = threads().get(url)
        for linked in (url, *(thread.related if thread else ())):
            if linked not in ordered:
                ordered.append(linked)
    return [(url, title_of(url)) for url in ordered]
