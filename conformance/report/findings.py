"""Stage 4, report: failing cells grouped by root cause, in Markdown ready for an upstream issue.

Contracts:

* `group_failures(envelopes, sources, cell_links)` groups every failing cell (raw
  verdict fail, error or timeout: its ``observed``, so a known failure counts)
  of one or more runs by its root cause, largest group first (most classes,
  then most cells). The root cause of a cell with a failure fingerprint
  (`conformance.fingerprints`) is its kind and where it happened
  (``module:qualname``); a fingerprint without a site keys on its failed
  guard (a recompile: ``<guard> @ <module:qualname>``), else its masked `what`
  (a contract stated in words, a numerical mismatch), else its exception. A cell without a fingerprint (run files older than fingerprints)
  keys on its reason with numbers and shapes masked (`fingerprints.mask`),
  and its group says so (`Group.by_reason`): one root cause reported from
  several files or messages then splits into several groups.
* A `Group` has a stable id (``<kind>-<8 hex digits of its key>``: the same
  root cause has the same id in every run, so an expectation's link or an
  upstream issue can name it), the classes, checks and cells it covers, the
  versions it was seen on (transformers, torch, device, dtype, backend of each
  run), and a representative class (the one whose cell took the fewest
  seconds) with the command that reproduces its cell
  (`report.reproduce.reproducer`, what `conformance explain` prints).
  Harness errors, crashes and timeouts are the suite's own gaps, not an
  upstream finding (`Group.upstream` False): they come after the others.
* `rank(groups, envelopes)` orders the upstream groups by what fixing the
  root cause would unlock (`Unlock`): the cells only this group blocks
  (a (class, column) whose failing cells in every run belong to this group
  alone) and the classes that would then pass every column of a path
  (`PATHS`: each column of the path in the run, passing, not applicable, or
  blocked by this group alone; at least one of them blocked by it; the
  quantized exports are one path, `QUANTIZED`: a class counts once when the
  group alone blocks any quantizer x backend pair of `QUANTIZED_PAIRS`, so
  a model's own bug is not counted once per pair). Most (class, path)
  unlocks first, then most cells, classes, cells in all.
  `site_in(group)` says where the site is: transformers, torch (dynamo,
  export, inductor, the ONNX exporter, other), another backend (ONNX
  Runtime), or no code site (a contract or numerical mismatch).
* `render_findings(groups, ...)` is the Markdown document: the ranked top
  ten (`TOP`) with their unlocks, a table of the groups, then one section
  per group (`render_group`), each ready to paste into an upstream issue,
  with its upstream `link`s where any was found (`Group.threads`: the
  threads its cells' expectations link, `conformance.report.upstream_threads`;
  none when no `cell_links` were given), ending with its cells and, per cell,
  the expectation that lists it (its link when it has one). After the table,
  the checkpoint profiles' rows whose verdicts differ from their class's
  default row, a line per cell (`conformance.report.profile_diff`), and the cells that fail in half
  precision only (`conformance.report.precision_diff`), each with its site and reason.

Torch-free: everything comes from the run files (and the expectation links
the caller passes in).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from conformance.checks.common import exporter_table
from conformance.columns import split as split_column
from conformance.fingerprints import SUITE_OWN_KINDS, SUITE_SITE, mask
from conformance.report import precision_diff, profile_diff
from conformance.report.reproduce import column_dtype, reproducer
from conformance.verdicts import FAILING

NOT_UPSTREAM = (*SUITE_OWN_KINDS, "timeout")  # fingerprint kinds that are the suite's own gaps (a SUITE_SITE too)
REASON_LIMIT = 600
CLASS_LIMIT = 30  # classes named in a group's heading lines before "and N more"


@dataclass(frozen=True)
class FailingCell:
    model: str
    check: str
    verdict: str  # as recorded (xfail for a known failure)
    raw: str  # what the check itself said: fail, error or timeout
    reason: str
    seconds: float
    fingerprint: dict
    expected: str  # the verdict an expectation lists ("" when none does)
    run: int  # index of the run file it is from


@dataclass
class Group:
    id: str
    kind: str  # fingerprint kind, or "" for cells grouped by reason
    where: str  # module:qualname, or the masked what / reason that keys the group
    by_reason: bool
    cells: list[FailingCell] = field(default_factory=list)
    threads: list[tuple[str, str]] = field(default_factory=list)  # (url, title) of the upstream threads found

    @property
    def classes(self) -> list[str]:
        return sorted({c.model for c in self.cells})

    @property
    def checks(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for c in self.cells:
            counts[c.check] = counts.get(c.check, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    @property
    def errors(self) -> list[str]:
        return sorted({c.fingerprint.get("error", "") for c in self.cells} - {""})

    @property
    def runs(self) -> list[int]:
        return sorted({c.run for c in self.cells})

    @property
    def upstream(self) -> bool:
        if self.where.startswith(SUITE_SITE):  # the suite's own code: never an upstream root cause
            return False
        if self.kind:
            return self.kind not in NOT_UPSTREAM
        return all(c.raw == "fail" for c in self.cells)

    @property
    def representative(self) -> FailingCell:
        return min(self.cells, key=lambda c: (c.seconds, c.model, c.check))

    def sites(self) -> dict[str, int]:
        """Graph-break sites of its cells, with their summed counts, most frequent first."""
        total: dict[str, int] = {}
        for c in self.cells:
            for site, count in (c.fingerprint.get("sites") or {}).items():
                total[site] = total.get(site, 0) + count
        return dict(sorted(total.items(), key=lambda kv: (-kv[1], kv[0])))

    def title(self) -> str:
        if self.by_reason:
            return f"(no fingerprint) {self.where}"
        return f"{self.kind} at {self.where}" if self.where else self.kind


def failing_cells(envelope: dict, run: int = 0) -> list[FailingCell]:
    """Every cell of a run whose check itself failed, errored or timed out (a known failure counts)."""
    found = []
    for name, row in sorted(envelope["models"].items()):
        for check_id, cell in row["cells"].items():
            said = cell["observed"]
            if said in FAILING:
                found.append(FailingCell(name, check_id, cell["verdict"], said, cell.get("reason", ""),
                                         float(cell.get("seconds") or 0.0), dict(cell.get("fingerprint") or {}),
                                         cell.get("expected", ""), run))
    return found


def group_key(cell: FailingCell) -> tuple[str, str, bool]:
    """(kind, site, grouped by reason) of a failing cell: its root cause as far as the run file says."""
    return cause_key(cell.fingerprint, cell.reason)


def cause_key(fingerprint: dict | None, reason: str) -> tuple[str, str, bool]:
    """`group_key` of a recorded cell's fingerprint and reason."""
    fingerprint = fingerprint or {}
    if fingerprint.get("kind"):
        site = next((fingerprint[f] for f in ("where", "guard", "what", "error") if fingerprint.get(f)), "")
        return fingerprint["kind"], site, False
    return "", mask(reason) or "(no reason recorded)", True


def cause_of(cell: dict) -> str:
    """`<group id>: <kind> at <site>` of a recorded failing cell: the findings group it belongs to."""
    kind, site, by_reason = cause_key(cell.get("fingerprint"), cell.get("reason", ""))
    return f"{group_id(kind, site, by_reason)}: " + (f"(no fingerprint) {site}" if by_reason else f"{kind} at {site}")


def group_id(kind: str, where: str, by_reason: bool) -> str:
    digest = hashlib.sha1(f"{kind}\0{where}\0{by_reason}".encode()).hexdigest()[:8]
    return f"{kind or 'reason'}-{digest}"


def group_failures(envelopes: list[dict], sources: list[str] | None = None,
                   cell_links: dict[tuple[str, str], str] | None = None) -> list[Group]:
    """The failing cells of the runs grouped by root cause, upstream findings first, each largest first; each
    group's threads are those its cells link in `cell_links` ((class, check) -> url)."""
    from conformance.report.upstream_threads import group_threads

    groups: dict[tuple[str, str, bool], Group] = {}
    for index, envelope in enumerate(envelopes):
        for cell in failing_cells(envelope, index):
            key = group_key(cell)
            if key not in groups:
                groups[key] = Group(group_id(*key), key[0], key[1], key[2])
            groups[key].cells.append(cell)
    for group in groups.values():
        group.threads = group_threads(group.cells, cell_links or {})
    return sorted(groups.values(), key=lambda g: (not g.upstream, -len(g.classes), -len(g.cells), g.id))


# --------------------------------------------------------------------------- ranking

PATHS = {"compile": ("compile_prefill", "compile_decode"),
         "export": ("export_forward", "export_forward_strict", "export_static_cache", "export_generate"),
         "onnx": ("export_onnx", "onnx_generate"),
         "cache": ("static_cache", "legacy_cache"),
         "executorch": ("executorch",),
         "aoti": ("aoti_forward", "aoti_generate"),  # AOTInductor packages: the forward and the generation parts
         # transformers.exporters, per backend: the forward and the generation a deployment takes
         **exporter_table.paths()}
QUANTIZED = "quantized"  # the one path of every quantizer x backend pair (see the module)


def _quantized_pairs() -> dict[str, tuple[str, ...]]:
    """``<quantizer>@<backend>`` -> that pair's column ids (the forward, the generation), in column order."""
    pairs: dict[str, tuple[str, ...]] = {}
    for row in sorted(exporter_table.COLUMNS, key=lambda row: row.number):
        if row.quantizer:
            key = f"{row.quantizer}@{row.backend}"
            pairs[key] = pairs.get(key, ()) + (row.id,)
    return pairs


QUANTIZED_PAIRS = _quantized_pairs()
TOP = 10  # groups in the ranked opening of the findings document
TORCH_SITES = (("torch._dynamo", "dynamo"), ("torch.export", "export"), ("torch._export", "export"),
               ("torch._inductor", "inductor"), ("<inductor generated code>", "inductor"),
               ("torch._functorch", "AOTAutograd"), ("torch.onnx", "the ONNX exporter"))
NOT_A_SITE = ("contract", "numerical_mismatch")  # kinds keyed by their masked words, unless they carry a frame
FRAME = re.compile(r"^[A-Za-z_<][\w.<> -]*:[\w.<>]+$")  # `module:qualname`, as `reasons.site_of` names a frame


@dataclass
class Unlock:
    """What fixing one group's root cause would unlock: the (class, column) cells it alone blocks, and per path
    the classes that would then pass every column of it."""

    cells: list[tuple[str, str]] = field(default_factory=list)
    paths: dict[str, list[str]] = field(default_factory=dict)

    @property
    def path_classes(self) -> int:
        """(class, path) pairs unlocked."""
        return sum(len(classes) for classes in self.paths.values())

    def summary(self) -> str:
        paths = ", ".join(f"{name} ×{len(classes)}" for name, classes in self.paths.items() if classes)
        return f"{len(self.cells)} cell(s)" + (f"; whole path: {paths}" if paths else "")


def _states(envelopes: list[dict]) -> dict[tuple[str, str], set[str]]:
    """(class, column) -> what its cells say over the runs: group ids of failing cells, "pass", "n/a", "other"."""
    states: dict[tuple[str, str], set[str]] = {}
    for envelope in envelopes:
        for name, row in envelope["models"].items():
            for column, cell in row["cells"].items():
                said = cell["observed"]
                if said in FAILING:
                    state = group_id(*cause_key(cell.get("fingerprint"), cell.get("reason", "")))
                else:
                    state = {"pass": "pass", "skip": "n/a"}.get(said, "other")
                states.setdefault((name, column), set()).add(state)
    return states


def unlocks(groups: list[Group], envelopes: list[dict]) -> dict[str, Unlock]:
    """`Unlock` of every group, by id (see the module)."""
    states = _states(envelopes)
    found = {g.id: Unlock() for g in groups}
    for (name, column), said in sorted(states.items()):
        failing = said - {"pass", "n/a", "other"}
        if len(failing) == 1 and "other" not in said:
            found[next(iter(failing))].cells.append((name, column))
    classes = sorted({name for name, _ in states})
    for path, columns in PATHS.items():
        for name in classes:
            if blocker := _sole_blocker(states, name, columns):
                found[blocker].paths.setdefault(path, []).append(name)
    for name in classes:
        blockers = (_sole_blocker(states, name, columns) for columns in QUANTIZED_PAIRS.values())
        for blocker in dict.fromkeys(b for b in blockers if b):
            found[blocker].paths.setdefault(QUANTIZED, []).append(name)
    return found


def _sole_blocker(states: dict, name: str, columns: tuple[str, ...]) -> str:
    """The group that alone keeps class `name` from passing every column of a path, or "" (none, or several)."""
    said = [states.get((name, column)) for column in columns]
    if any(s is None or "other" in s for s in said):
        return ""
    failing = set().union(*said) - {"pass", "n/a"}
    if len(failing) == 1 and any("pass" in s or failing & s for s in said):
        return next(iter(failing))
    return ""


def rank(groups: list[Group], envelopes: list[dict]) -> list[tuple[Group, Unlock]]:
    """The upstream groups with their `Unlock`, most unlocked first (see the module)."""
    found = unlocks(groups, envelopes)
    ranked = [(g, found[g.id]) for g in groups if g.upstream]
    return sorted(ranked, key=lambda gu: (-gu[1].path_classes, -len(gu[1].cells), -len(gu[0].classes),
                                          -len(gu[0].cells), gu[0].id))


def site_in(group: Group) -> str:
    """Where a group's site is: ``transformers``, ``torch (dynamo)`` and the like, ``another backend (...)``, or
    ``no code site`` (a contract or a numerical mismatch keyed by its words; one whose fingerprint names the frame
    that broke the contract, as the exporters' left-out components do, is placed by that frame)."""
    if group.by_reason or (group.kind in NOT_A_SITE and not FRAME.match(group.where)):
        return "no code site"
    where = group.where.rsplit(" @ ", 1)[-1] if group.kind == "recompile" else group.where
    if group.kind == "recompile":  # a failed guard sits in the traced code: the model's (dynamo traces no torch)
        return "transformers"
    if not FRAME.match(where):  # keyed by words (an AOTI package's `load: ...`, `run: ...`): no frame to place it
        return "no code site"
    if where.startswith("transformers."):
        return "transformers"
    for prefix, part in TORCH_SITES:
        if where.startswith(prefix):
            return f"torch ({part})"
    if where.startswith("torch."):
        return "torch (other)"
    if not where or ":" not in where:
        return "no code site"
    return f"another backend ({where.split('.', 1)[0].split(':', 1)[0]})"


# --------------------------------------------------------------------------- Markdown


def seen_on(envelope: dict) -> str:
    env = envelope["environment"]
    return (f"transformers {env.get('transformers', '?')}, torch {env.get('torch', '?')}, "
            f"{env.get('device', '?')} / {env.get('dtype', '?')} / backend {env.get('backend', '?')}")


def _code(text: str, limit: int = REASON_LIMIT) -> str:
    text = " ".join(str(text).split()).replace("`", "'")
    return f"`{text[: limit - 3] + '...' if len(text) > limit else text}`"


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:CLASS_LIMIT])
    return shown + (f" and {len(names) - CLASS_LIMIT} more" if len(names) > CLASS_LIMIT else "")


def render_group(group: Group, envelopes: list[dict], sources: list[str],
                 links: dict[tuple[str, str], str] | None = None, unlock: Unlock | None = None) -> list[str]:
    """One group's section: what fails where, seen on which versions, how to reproduce it, and its cells."""
    links = links or {}
    first = group.representative
    env = envelopes[first.run]["environment"]
    lines = [f"### {_code(group.title(), 200)}", "", f"<a id=\"{group.id}\"></a>Group `{group.id}`: "
             f"{len(group.classes)} class(es), {len(group.cells)} cell(s)"
             + ("" if group.upstream else " — the suite's own gap (harness error, crash or timeout), not upstream")
             + ".", ""]
    if group.by_reason:
        lines += ["Grouped by the failure's reason with numbers and shapes masked: the run file has no failure "
                  "fingerprint for these cells.", ""]
    facts = [("Seen on", "; ".join(seen_on(envelopes[i]) for i in group.runs)),
             ("Classes", _names(group.classes)),
             ("Checks", ", ".join(f"`{c}` ({n})" for c, n in group.checks.items()))]
    if group.errors:
        facts.append(("Exception", ", ".join(f"`{e}`" for e in group.errors)))
    sites = group.sites()
    if sites:
        facts.append(("Graph-break sites", "; ".join(f"{_code(s, 200)} ×{n}" for s, n in list(sites.items())[:5])
                      + (f"; and {len(sites) - 5} more" if len(sites) > 5 else "")))
    guards = sorted({c.fingerprint["guard"] for c in group.cells if c.fingerprint.get("guard")})
    if guards:
        facts.append(("Failed guard", "; ".join(_code(g, 200) for g in guards[:3])))
    if group.upstream:
        facts.append(("Site in", site_in(group)))
    if unlock is not None:
        facts.append(("Fixing it unlocks", unlock.summary()))
    facts += [("link", f"[{title}]({url})") for url, title in group.threads]
    lines += [f"- **{name}**: {value}" for name, value in facts] + [""]
    lines += [f"Example ({first.model} / `{first.check}`): {_code(first.reason)}", ""]
    lines += ["Reproduce with vlm-conformance (a tiny random model of the class, no weights, no network):", "",
              "```sh",
              f"conformance explain {first.model} {split_column(first.check)[0]} --device {env.get('device', 'cpu')} "
              f"--dtype {column_dtype(first.check, env.get('dtype', 'float32'))} "
              f"--backend {split_column(first.check)[1] or env.get('backend', 'eager')}",
              reproducer(first.model, first.check, env.get("device", "auto"), env.get("dtype", "float32"),
                         env.get("backend", "eager")),
              "```", ""]
    if group.upstream:
        lines += [f"A standalone script (torch and transformers only): `conformance findings RUN.json --repro DIR "
                  f"--group {group.id}` writes `DIR/{group.id}.py` (`--verify` checks that it fails the same way).", ""]
    rows = []
    for c in sorted(group.cells, key=lambda c: (c.model, c.check, c.run)):
        key = (c.model, c.check)
        listed = (f"[listed]({links[key]})" if links.get(key) else "listed") if c.expected or key in links \
            else "not listed"
        run = f" | {sources[c.run]}" if len(envelopes) > 1 else ""
        rows.append(f"| {c.model} | `{c.check}` | {c.verdict} | {listed}{run} |")
    head = "| class | check | verdict | expectation |" + (" run |" if len(envelopes) > 1 else "")
    rule = "| --- | --- | --- | --- |" + (" --- |" if len(envelopes) > 1 else "")
    lines += [f"<details><summary>The {len(group.cells)} cell(s)</summary>", "", head, rule, *rows, "",
              "</details>", ""]
    return lines


def render_findings(groups: list[Group], envelopes: list[dict], sources: list[str],
                    links: dict[tuple[str, str], str] | None = None, only: str = "") -> str:
    """The findings document; `only`: one group's section alone (by id), ready to paste."""
    if only:
        chosen = [g for g in groups if g.id == only]
        if not chosen:
            raise KeyError(only)
        unlock = unlocks(groups, envelopes)[only] if chosen[0].upstream else None
        return "\n".join(render_group(chosen[0], envelopes, sources, links, unlock)).rstrip("\n") + "\n"
    cells = sum(len(g.cells) for g in groups)
    upstream = [g for g in groups if g.upstream]
    lines = ["# Findings: failing cells by root cause", ""]
    lines += [f"From {', '.join(f'`{s}`' for s in sources)} ({'; '.join(seen_on(e) for e in envelopes)}).", ""]
    lines += [f"{cells} failing cell(s) (fail, error or timeout, known failures included) in {len(groups)} "
              f"group(s): {len(upstream)} upstream finding(s) ({sum(len(g.cells) for g in upstream)} cells), "
              f"{len(groups) - len(upstream)} gap(s) of the suite.", ""]
    by_reason = sum(len(g.cells) for g in groups if g.by_reason)
    if by_reason:
        lines += [f"{by_reason} cell(s) have no failure fingerprint (a run file older than fingerprints): they are "
                  "grouped by their reason with numbers and shapes masked (`conformance.fingerprints.mask`), "
                  "so one root cause named in several files or messages splits into several groups. A new run "
                  "groups them by fingerprint (kind and `module:qualname`).", ""]
    if not groups:
        return "\n".join(lines + ["No failing cell."]) + "\n"
    ranked = rank(groups, envelopes)
    lines += render_top(ranked)
    found = dict((g.id, u) for g, u in ranked)
    lines += ["## Every group", ""]
    lines += ["| # | group | kind | where | classes | cells | checks |", "| ---: | --- | --- | --- | ---: | ---: | --- |"]
    for index, g in enumerate(groups, 1):
        where = _code(g.where, 120).replace("|", "\\|")
        lines.append(f"| {index} | [`{g.id}`](#{g.id}) | {g.kind or '(reason)'} | {where} | {len(g.classes)} | "
                     f"{len(g.cells)} | {', '.join(g.checks)} |")
    lines += [""]
    lines += profile_diff.render(envelopes)
    lines += precision_diff.render(envelopes)
    if upstream:
        lines += ["## Upstream findings", ""]
        for g in upstream:
            lines += render_group(g, envelopes, sources, links, found.get(g.id))
    if len(upstream) < len(groups):
        lines += ["## Gaps of the suite (harness errors, crashes, timeouts)", ""]
        for g in groups[len(upstream):]:
            lines += render_group(g, envelopes, sources, links)
    return "\n".join(lines).rstrip("\n") + "\n"


def render_top(ranked: list[tuple[Group, Unlock]], top: int = TOP) -> list[str]:
    """The ranked opening: the `top` upstream groups by what fixing each would unlock (`rank`)."""
    if not ranked:
        return []
    lines = [f"## Fix first: the top {min(top, len(ranked))} root causes by what fixing them unlocks", "",
             "Cells: the (class, column) cells this group alone blocks. Whole path: the classes that would then "
             "pass every column of a path (" + "; ".join(f"{name} = {' + '.join(columns)}" for name, columns
                                                          in PATHS.items())
             + (f"; {QUANTIZED} = the forward + generation of any of the {len(QUANTIZED_PAIRS)} quantizer x backend "
                "pairs, a class counted once" if QUANTIZED_PAIRS else "") + "), not applicable columns aside.", "",
             "| rank | group | kind | where | site in | cells | whole path | classes |",
             "| ---: | --- | --- | --- | --- | ---: | --- | ---: |"]
    for index, (g, u) in enumerate(ranked[:top], 1):
        paths = ", ".join(f"{name} ×{len(classes)}" for name, classes in u.paths.items() if classes) or "—"
        where = _code(g.where, 120).replace("|", "\\|")
        lines.append(f"| {index} | [`{g.id}`](#{g.id}) | {g.kind or '(reason)'} | {where} | {site_in(g)} | "
                     f"{len(u.cells)} | {paths} | {len(g.classes)} |")
    return lines + [""]
