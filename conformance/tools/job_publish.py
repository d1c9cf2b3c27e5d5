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
* `published_picture(joblist, root)` then retakes reports/matrix.png from
  the gate version's page (`publishing.published_picture`; `jobs publish
  --no-screenshot` skips it): one line saying what it did.
"""

from __future__ import annotations

from pathlib import Path

from conformance import versions
from conformance.gate.judging import judge_envelope
from conformance.report import cell_code
from conformance.report import envelope as report
from conformance.tools import publishing
from conformance.tools.job_run import JobFiles
from conformance.tools.jobs import JobsError
from conformance.tools.run_files import merged as merged_runs


def unfinished(joblist: dict, root: Path, env: str | None = None) -> list[str]:
    """The ids of the jobs (of `env`, else all) that have not finished."""
    return [job["id"] for job in joblist["jobs"]
            if (env is None or job["env"] == env) and not JobFiles(root / job["out"]).done(job["command"])]


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


def merge_version(joblist: dict, env: str, root: Path) -> dict:
    listed = next((v for v in joblist["versions"] if v["env"] == env), None)
    if listed is None:
        listed_envs = ", ".join(v["env"] for v in joblist["versions"])
        raise JobsError(f"the job list has no version {env!r}; it has {listed_envs}")
    left = unfinished(joblist, root, env)
    if left:
        raise JobsError(f"{len(left)} job(s) of {env} have not finished ({', '.join(left[:5])}"
                        f"{', ...' if len(left) > 5 else ''}): run `conformance jobs run` on the same list "
                        "(it continues them), or fetch their envelopes")
    envelopes, sources, other_code = [], [], {}
    code = cell_code.of_package()
    for job in (j for j in joblist["jobs"] if j["env"] == env):
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
    merged = {**merged_runs(envelopes, sources)[0], "suite": report.suite_version()}
    judged, _ = judge_envelope(merged, _expectations_named(joblist, env, root))
    return _with_not_run(judged, listed.get("not_run", {}), listed.get("check_info", {}))


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
