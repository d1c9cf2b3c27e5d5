"""Merging a job list's envelopes into one envelope per version, and publishing it.

Contracts:

* `merge_version(joblist, env, root)` is the envelope of one version: the
  envelopes of its jobs, in list order (the plain group first: its backend
  is the matrix's, another backend's jobs join as ``<check>@<backend>``
  columns), merged as `conformance merge` merges (`run_files.merged`), plus the columns no job ran
  as not run with the job list's reasons (as a plain run records them).
  JobsError (one line: which jobs, the command that finishes them) when a
  job has not finished, when an envelope is of another transformers
  version than its job's, when a job ran other classes than its entry
  lists (a ``--shard`` deals classes by the published seconds of the day
  it runs: publish the gate's version after its list's last job), or when one was made by other cell code than
  this suite's (`conformance.report.cell_code`: the published cells are
  the output of one commit's checks, whichever commits ran them). The
  merged envelope's `suite` is this suite's (its commit, that cell code),
  and every cell is judged again against today's expectations
  (`gate.judging.judge_envelope`: the file the jobs' ``--expectations`` names, else the
  version's), whatever the file said when each job ran.
* `publish(joblist, root)` writes each version's merged envelope (the job
  list's `merged`) and publishes it as `conformance publish` does
  (`publishing.publish`: reports/ and the README for the gate's version,
  reports/<env>/ for another), returning the files written.
* `publish_group(joblist, env, group, root)` publishes one column group of one version (`jobs publish --group`):
  its jobs merged as `merge_version` merges, its amendments (``reports/jobs/reruns/<env>-<group>-*.json``:
  cells rerun alone where the machine ended their job's run; `merge_group`) over them, written to
  reports/latest/<env>-<group>.json, then (when every cell of it is what today's expectations say) its columns
  replace those of the version's published matrix whole and the result, judged against today's expectations, is
  published as `publish` publishes. JobsError (one line) as `merge_version`, for a cell not as expected (nothing
  published: `conformance expectations --update` on the group's run, then again), and for an amendment of other
  cell code, of a cell outside the group, or of a cell its job gave a verdict.
* `published_picture(joblist, root)` then retakes reports/matrix.png from
  the gate version's page (`publishing.published_picture`; `jobs publish
  --no-screenshot` skips it): one line saying what it did.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from conformance import versions
from conformance.gate.judging import judge_envelope
from conformance.report import cell_code, io
from conformance.report import envelope as report
from conformance.tools import jobs as joblists
from conformance.tools import publishing
from conformance.tools.job_run import JobFiles
from conformance.tools.jobs import JobsError
from conformance.tools.run_files import merged as merged_runs
from conformance.verdicts import FAILING


def _with_not_run(envelope: dict, not_run: dict[str, str], check_info: dict) -> dict:
    """`envelope` with the columns no job ran added as not run (in column order), as a plain run records them."""
    missing = {c: why for c, why in not_run.items() if c not in envelope["checks"]}
    if not missing:
        return envelope
    info = {**{c: check_info.get(c, {}) for c in missing}, **envelope["check_info"]}
    checks = list(envelope["checks"]) + list(missing)
    if all(isinstance((info.get(c) or {}).get("column"), int) for c in checks):
        checks.sort(key=lambda c: info[c]["column"])
    return {**envelope, "checks": checks, "check_info": info, "not_run": {**envelope["not_run"], **missing},
            "summary": report.summarize(envelope["models"], checks)}


def _listed(joblist: dict, env: str) -> dict:
    listed = next((v for v in joblist["versions"] if v["env"] == env), None)
    if listed is None:
        listed_envs = ", ".join(v["env"] for v in joblist["versions"])
        raise JobsError(f"the job list has no version {env!r}; it has {listed_envs}")
    return listed


def merge_version(joblist: dict, env: str, root: Path) -> dict:
    listed = _listed(joblist, env)
    merged = _merged_jobs([j for j in joblist["jobs"] if j["env"] == env], env, root)
    judged, _ = judge_envelope(merged, _expectations_named(joblist, env, root))
    return _with_not_run(judged, listed.get("not_run", {}), listed.get("check_info", {}))


def _merged_jobs(jobs: list[dict], env: str, root: Path) -> dict:
    """The envelopes of `jobs` (one version's, all finished, by this suite's cell code) merged, not judged."""
    left = [job["id"] for job in jobs if not JobFiles(root / job["out"]).done(job["command"])]
    if left:
        raise JobsError(f"{len(left)} job(s) of {env} have not finished ({', '.join(left[:5])}"
                        f"{', ...' if len(left) > 5 else ''}): run `conformance jobs run` on the same list "
                        "(it continues them), or fetch their envelopes")
    envelopes, sources, other_code = [], [], {}
    code = cell_code.of_package()
    for job in jobs:
        path = root / job["out"]
        if not path.exists():  # finished with no cell (nothing selected): nothing to merge
            continue
        envelope = report.load_envelope(path)
        made_with = versions.major_minor(str(envelope["environment"].get("transformers", "")))
        if made_with != versions.major_minor(job["transformers"]):
            raise JobsError(f"{job['out']}: made with transformers {envelope['environment'].get('transformers')}, "
                            f"its job {job['id']} is for {job['transformers']}; run it again with --rerun "
                            f"--only {job['id']} under that version's Python")
        torch_axis = next((v.torch for v in versions.supported() if v.env == env), "")
        made_on = str(envelope["environment"].get("torch", "")).split("+")[0]
        if torch_axis and versions.major_minor(made_on) != versions.major_minor(torch_axis):
            raise JobsError(f"{job['out']}: made with torch {made_on}, its job {job['id']} is for torch {torch_axis}; "
                            f"run it again with --rerun --only {job['id']} under that version's Python")
        _took_its_classes(job, envelope)
        made_by = JobFiles(path).made_by()
        if made_by != code:
            other_code[job["id"]] = made_by or "unknown"
        envelopes.append(envelope)
        sources.append(job["out"])
    if other_code:
        named = ", ".join(f"{job} ({made_by})" for job, made_by in list(other_code.items())[:4])
        raise JobsError(f"{len(other_code)} job(s) of {env} were made by other cell code than this suite's {code}: "
                        f"{named}{', ...' if len(other_code) > 4 else ''}; `conformance jobs run` on the same list "
                        "runs them again")
    if not envelopes:
        raise JobsError(f"no job of {env} recorded a cell; check the job list's --models and --checks")
    return {**merged_runs(envelopes, sources)[0], "suite": report.suite_version()}


def _took_its_classes(job: dict, envelope: dict) -> None:
    """JobsError unless the job's run took the classes its entry lists: a ``--shard i/N`` run deals the classes by
    the published seconds it reads when it runs, so a matrix republished between the plan and a run deals them
    differently, and two shards of one group would overlap or leave classes out."""
    planned, ran = set(job.get("classes", [])), set(envelope["models"])
    if not planned or ran == planned:
        return
    odd = sorted(ran ^ planned)
    raise JobsError(f"{job['out']}: job {job['id']} ran {len(ran - planned)} class(es) its entry does not list and "
                    f"left out {len(planned - ran)} it lists ({', '.join(odd[:3])}{', ...' if len(odd) > 3 else ''}): "
                    "the published seconds its --shard reads changed after the list was planned; plan the list "
                    "again, or run the job again with --rerun --only " + job["id"] + " before the matrix changes")


def _expectations_named(joblist: dict, env: str, root: Path) -> Path | None:
    """The expectations file the version's jobs name (``--expectations PATH``, from `root`), else None."""
    for job in (j for j in joblist["jobs"] if j["env"] == env):
        command = job["command"]
        for index, arg in enumerate(command):
            if arg == "--expectations" and index + 1 < len(command):
                return root / command[index + 1]
            if arg.startswith("--expectations="):
                return root / arg.split("=", 1)[1]
    return None


def publish(joblist: dict, root: Path) -> list[Path]:
    """Merge and publish every version of the job list; the files written (see the module's contract)."""
    merged = {v["env"]: merge_version(joblist, v["env"], root) for v in joblist["versions"]}  # all before writing
    written = []
    for listed in joblist["versions"]:
        written += publishing.publish(merged[listed["env"]], root, merged_to=root / listed["merged"])
    return written


def published_picture(joblist: dict, root: Path) -> str:
    """Retake reports/matrix.png from the gate version's published page (`publishing.published_picture`); one line."""
    gate = [v for v in joblist["versions"] if publishing.version_folder(_published(root, v)) is None]
    if not gate:
        return (f"{root / publishing.PUBLISHED_PAGE.with_suffix('.png')} left as it was (the gate's version was not "
                "published)")
    return publishing.published_picture(_published(root, gate[0]), root)


def _published(root: Path, listed: dict) -> dict:
    return report.load_envelope(root / listed["merged"])


# --------------------------------------------------------------------------- one column group


AMENDMENTS = Path("reports/jobs/reruns")


@dataclass(frozen=True)
class GroupPublication:
    """What `publish_group` did: the files written, the group's cells, how many the amendments replaced (and
    their files), and where the group's merged run was written."""

    written: list[Path]
    cells: int
    amended: int
    amendments: list[str]
    group_run: Path


def group_jobs(joblist: dict, env: str, group: str) -> list[dict]:
    """The jobs of one column group of one version, or JobsError naming the groups the list has for it."""
    jobs = [j for j in joblist["jobs"] if j["env"] == env and j["group"] == group]
    if not jobs:
        groups = sorted({j["group"] for j in joblist["jobs"] if j["env"] == env})
        raise JobsError(f"--group: the job list has no group {group!r} for {env}; it has {', '.join(groups)}")
    return jobs


def amendment_files(root: Path, env: str, group: str) -> list[Path]:
    """The group's amendments: ``reports/jobs/reruns/<env>-<group>-*.json``, in name order."""
    return sorted((root / AMENDMENTS).glob(f"{env}-{group}-*.json"))


def _amended(envelope: dict, paths: list[Path], root: Path) -> tuple[dict, int]:
    """`envelope` with the amendments' cells over its own (`report.supersede`), and how many they replaced.

    An amendment is cells run again alone because their job's run ended for the machine (a crashed worker, the
    memory watchdog, the time limit: `sample.MACHINE_KINDS`), at the same cell code: JobsError when one holds a
    cell the group did not end so, a cell outside the group, or a run of other cell code. A verdict a job
    reached is never run over."""
    from conformance.tools.sample import MACHINE_KINDS

    code = cell_code.of_package()
    amendments = []
    for path in paths:
        amendment = report.load_envelope(path)
        name = path.relative_to(root).as_posix()
        codes = {run.get("cell_code") or "unknown" for run in report.runs_of(amendment, name)}
        if codes != {code}:
            raise JobsError(f"{name}: made by cell code {', '.join(sorted(codes))}, not this suite's {code}; run its "
                            "cells again alone, or remove it")
        for model, row in amendment["models"].items():
            for column in row["cells"]:
                cell = envelope["models"].get(model, {}).get("cells", {}).get(column)
                if cell is None:
                    raise JobsError(f"{name}: {model} {column} is not a cell of the group; an amendment reruns the "
                                    "group's own cells")
                ended_by_machine = (cell["observed"] == "timeout"
                                    or (cell.get("fingerprint") or {}).get("kind") in MACHINE_KINDS)
                if not ended_by_machine:
                    raise JobsError(f"{name}: {model} {column} has a verdict in its job ({cell['observed']}); an "
                                    "amendment replaces only cells whose run the machine ended (crash, resources, "
                                    "timeout)")
        amendments.append(amendment)
    if not amendments:
        return envelope, 0
    sources = ["group"] + [p.relative_to(root).as_posix() for p in paths]
    amended, replaced = merged_runs([envelope, *amendments], sources, replace=True)
    return {**amended, "suite": envelope["suite"]}, replaced


def merge_group(joblist: dict, env: str, group: str, root: Path) -> tuple[dict, int, list[Path]]:
    """The group's jobs merged (as `merge_version` merges a version's), its amendments over them, judged against
    today's expectations; with how many cells the amendments replaced and their files."""
    paths = amendment_files(root, env, group)
    merged, amended = _amended(_merged_jobs(group_jobs(joblist, env, group), env, root), paths, root)
    judged, _ = judge_envelope(merged, _expectations_named(joblist, env, root))
    return judged, amended, paths


def publish_group(joblist: dict, env: str, group: str, root: Path) -> GroupPublication:
    """Publish one column group over the version's published matrix: its merged run (`merge_group`) written to
    reports/latest/<env>-<group>.json (what `conformance expectations --update` reads); JobsError, nothing
    published, when one of its cells is not what today's expectations say (a failure none lists, a pass where
    one is listed); else its columns replace those columns of the published matrix whole (`report.supersede`),
    the result judged against today's expectations and published as `publish` publishes a version. The other
    columns' cells stay as published."""
    listed = _listed(joblist, env)
    group_envelope, amended, paths = merge_group(joblist, env, group, root)
    group_run = root / "reports" / "latest" / f"{env}-{group}.json"
    io.write_json_atomic(group_run, group_envelope)
    cells = [cell for row in group_envelope["models"].values() for cell in row["cells"].values()]
    failing = sum(cell["verdict"] in FAILING for cell in cells)
    stale = sum(cell["verdict"] == "xpass" for cell in cells)
    if failing or stale:
        raise JobsError(f"{failing + stale} cell(s) of {env}'s {group} group are not what today's expectations say "
                        f"({failing} fail with no expectation, {stale} pass where one is listed); nothing was "
                        f"published: `conformance expectations --update {group_run.relative_to(root)}` writes them "
                        "(review the diff), then run this again")
    published_path = joblists.published_path(joblists.version_of(env), root)
    published = report.load_envelope(published_path)
    names = [published_path.relative_to(root).as_posix(), group_run.relative_to(root).as_posix()]
    over, _ = report.supersede([published, group_envelope], names, whole_columns=True)
    judged, _ = judge_envelope({**over, "suite": report.suite_version()}, _expectations_named(joblist, env, root))
    written = publishing.publish(judged, root, merged_to=root / listed["merged"])
    return GroupPublication(written, len(cells), amended, [p.relative_to(root).as_posix() for p in paths], group_run)
