"""The publishing run of a transformers version as a job list: version x column group x shard.

Contracts:

* `column_groups(checks)` is the matrix's column groups, from the registry:
  ``plain`` (every check that is neither opt-in nor optional), one per
  dynamo backend of `BACKENDS` (the plain checks that declare backend
  columns, `conformance.columns`: ``--backend inductor
  --checks compile_prefill,compile_decode``), one per opt-in group
  (``dynamic``: ``--checks compile_dynamic,export_dynamic``; ``aoti``), one per
  extra (``onnx``, ``executorch``: the checks that extra installs), then
  the half-precision groups: for each dtype of `HALF_DTYPES` the plain
  group and each backend's again, run with ``--dtype`` (``plain~bf16``,
  ``inductor~bf16``, ``plain~fp16``, ``inductor~fp16``: `columns.dtype_column`
  of the group's name; their envelopes merge as dtype columns,
  ``static_cache~bf16``). The float32 groups' names and commands are those
  they always had. With
  `checks`, each group keeps only those (a group left empty is dropped);
  a plan with `Request.checks` records the others as not run.
* `plan(...)` is the job list (a JSON-able dict, schema `SCHEMA`): for each
  version and chosen group, the fewest shards whose expected wall fits the
  budget (`run.shards.plan`, from the published seconds the run's ``--shard``
  uses, so that each job's predicted classes are the ones its run takes), or
  the shards asked for. Each job has an id (``<env>-<group>-<i>of<n>``; a
  group that `Request.checks` narrows is ``<env>-<group>-<check>+...-<i>of<n>``,
  so that a rerun of some columns never takes, or clears, the files of the
  whole group's job in the same out_dir), its
  `command` (argv; ``python`` is the interpreter of the job's version, see
  `job_run`), its `out` (the envelope, under `out_dir`, relative to the
  repository root), its install line and its expected classes and seconds.
  Each version names its merged envelope and the columns no chosen group
  runs, with why (`not_run`, `check_info`), so that the merged matrix shows
  them as not run, exactly as a plain run does.
* The list depends only on its inputs (no clock, no machine path): the same
  inputs give the same list on every machine, and a CI runner can take its
  entry by id.
* `load(path)` reads a job list back, or raises `JobsError`; every error is
  one line for a person (`JobsError`).
* `of_versions(joblist, envs)` is the list's part for those versions (their
  jobs, in list order, and their merged envelopes), so that a publishing run
  can publish one version while another's jobs still run; JobsError naming
  the list's versions for an env it does not hold.
* `redealt(joblist, published)` is the ids of the sharded jobs whose
  ``--shard`` would deal other classes than their entries list by the
  published seconds of today (a publication since the list was planned):
  `jobs run` refuses to run them, `jobs status` names them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

from conformance import columns, versions
from conformance.report import envelope as report
from conformance.report import provenance
from conformance.run import shards
from conformance.tools.pytest_options import PytestOptions

SCHEMA = "vlm-conformance-jobs/1"
# Dynamo backends whose compile columns the published matrix carries next to the run's own (eager): the backend
# users compile with. A backend is a run option, not a registered check, so this is the one hand-kept list.
BACKENDS = ("inductor",)
# The half precisions the published matrix carries next to float32 (issue 52): what users compile and export in.
HALF_DTYPES = ("bfloat16", "float16")
MAIN_DTYPE = "float32"
# Options a group's run needs beyond --checks (tox.ini's envs): ExecuTorch's lowering takes minutes a model,
# AOTInductor's C++ build a minute or more; a quantized cell exports twice (quantized, then float to size against),
# ExecuTorch's lowering among them.
GROUP_ARGS = {"executorch": ("--cell-timeout", "900"), "aoti": ("--cell-timeout", "900"),
              "quantized": ("--cell-timeout", "900")}
TARGET = "conformance/test_matrix.py"  # the cells only: the meta tests are CI's, not the matrix's
OUT_DIR = "reports/latest/jobs"
# The planning defaults of every job list (`jobs list`/`run`/`publish`, `jobs gate` and `plan`, which previews the gate):
DEFAULT_BUDGET = 3600.0  # seconds a job may take: a GitHub runner's job runs for up to 6 hours; a gate's groups run
#                          one after another on one machine anyway
DEFAULT_WORKERS = 2  # xdist workers a job: a GitHub runner's two cores
# The environment of every job's run, as tox.ini sets it.
RUN_ENV = {"PYTHONHASHSEED": "0", "TOKENIZERS_PARALLELISM": "false"}


class JobsError(ValueError):
    """A job list cannot be made, read or run as asked; the message is one line for a person."""


@dataclass(frozen=True)
class Group:
    name: str
    checks: tuple[str, ...]
    backend: str = "eager"
    extra: str = ""  # the pip extra its checks need
    opt_in: str = ""
    args: tuple[str, ...] = ()
    dtype: str = MAIN_DTYPE

    def pytest_args(self) -> list[str]:
        backend = ["--backend", self.backend] if self.backend != "eager" else []
        dtype = ["--dtype", self.dtype] if self.dtype != MAIN_DTYPE else []
        return ["--checks", ",".join(self.checks), *backend, *dtype, *self.args]

    @property
    def main_columns(self) -> bool:
        """Whether the group runs the matrix's own columns (eager, float32): those a group left out names as not
        run; another backend's or dtype's columns are named only where they ran."""
        return self.backend == "eager" and self.dtype == MAIN_DTYPE


def column_groups(checks: list[str] | None = None) -> list[Group]:
    """The column groups of the matrix, from the registry (see the module's contract)."""
    from conformance.checks.common.registry import load_all

    specs = list(load_all().values())
    plain = tuple(c.id for c in specs if not c.opt_in and not c.extra)
    found = [Group("plain", plain)]
    found += [Group(b, tuple(c.id for c in specs if c.id in plain and c.backend_columns), backend=b) for b in BACKENDS]
    for name in dict.fromkeys(c.opt_in for c in specs if c.opt_in and not c.extra):
        found.append(Group(name, tuple(c.id for c in specs if c.opt_in == name and not c.extra), opt_in=name,
                           args=GROUP_ARGS.get(name, ())))
    for extra in dict.fromkeys(c.extra for c in specs if c.extra):
        found.append(Group(extra, tuple(c.id for c in specs if c.extra == extra), extra=extra,
                           args=GROUP_ARGS.get(extra, ())))
    half = [g for g in found if g.name == "plain" or g.backend != "eager"]
    found += [Group(columns.dtype_column(g.name, d), g.checks, backend=g.backend, dtype=d)
              for d in HALF_DTYPES for g in half]
    names = [g.name for g in found]
    if len(set(names)) != len(names):
        raise JobsError(f"column groups: two groups share a name in {names}; rename an opt-in group or an extra")
    if checks:
        known = {c.id for c in specs}
        unknown = [c for c in checks if c not in known]
        if unknown:
            raise JobsError(f"--checks: unknown check id {unknown[0]!r}; known: {', '.join(c.id for c in specs)}")
        found = [Group(g.name, tuple(c for c in g.checks if c in checks), g.backend, g.extra, g.opt_in, g.args,
                       g.dtype) for g in found]
    return [g for g in found if g.checks]


def installed(group: Group) -> str:
    """"" when the group's checks can run here, else why not (the missing packages and the install command)."""
    from conformance.checks.common.registry import unavailable

    return next((why for why in map(unavailable, group.checks) if why), "")


def choose_groups(groups: list[Group], names: list[str], extras: str) -> tuple[list[Group], dict[str, str]]:
    """The groups of a publishing run, and {check: why not run} for the registry's checks none of them runs.

    `names` restricts the groups (empty: all); `extras` is ``installed`` (an extra's group only where its packages
    are installed), ``all`` or a comma-separated list of extras (each runner installs its group's extra).
    """
    from conformance.checks.common.registry import check_ids, opt_in_reason, unavailable

    known = [g.name for g in groups]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise JobsError(f"--groups: unknown group {unknown[0]!r}; the matrix's groups here: {', '.join(known)}")
    wanted = [e for e in extras.split(",") if e] if extras not in ("installed", "all") else []
    bad = [e for e in wanted if e not in {g.extra for g in groups if g.extra}]
    if bad:
        raise JobsError(f"--extras: no group needs the extra {bad[0]!r}; use installed, all, or some of "
                        f"{', '.join(g.extra for g in groups if g.extra)}")
    chosen, not_run = [], {}
    for group in groups:
        why, missing = "", {}
        if names and group.name not in names:
            why = opt_in_reason(group.checks[0]) if group.opt_in else \
                f"not in this publishing run: conformance jobs publish --groups {group.name}"
        elif group.extra:
            missing = {c: reason for c, reason in ((c, unavailable(c)) for c in group.checks) if reason}  # each its own
            if extras == "installed" and missing or wanted and group.extra not in wanted:
                why = next(iter(missing.values()), f"not in this publishing run: --extras {group.extra}")
            else:
                missing = {}
        if why:
            if group.main_columns:  # another backend's (dtype's) columns are named only where they ran
                not_run.update({c: missing.get(c) or why for c in group.checks})
            continue
        chosen.append(group)
    ran = {c for g in chosen if g.main_columns for c in g.checks}
    not_run = {c: why for c, why in not_run.items() if c not in ran}
    return chosen, {c: not_run[c] for c in check_ids() if c in not_run}


# --------------------------------------------------------------------------- versions and classes


def version_of(env: str) -> versions.Version:
    found = {v.env: v for v in versions.supported()}
    if env not in found:
        raise JobsError(f"--env: {env!r} is not a supported version's env; known: {', '.join(found)} "
                        "(fixtures/versions.toml, `conformance versions`)")
    return found[env]


def installed_env() -> str:
    """The env of the installed transformers, or JobsError naming the versions to choose from."""
    here = versions.installed()
    if here is None:
        raise JobsError(f"--env: the installed transformers {versions.installed_version()} is not a supported "
                        f"version; pass --env with one of {', '.join(v.env for v in versions.supported())}")
    return here.env


def published_path(version: versions.Version, root: Path) -> Path:
    """Where a version's matrix is published: reports/matrix.json for the gate's, reports/<env>/ for the others."""
    return root / ("reports/matrix.json" if version.is_gate else f"reports/{version.env}/matrix.json")


def published_classes(version: versions.Version, root: Path, models: str) -> list[str]:
    """The classes of a version's published matrix that `models` (globs; empty: all) selects: the plan of a version
    that is not installed here (its runs discover their own classes; only the predicted shares differ). A torch axis
    not published yet takes those of its transformers on the suite's own torch (the same classes)."""
    path = published_path(version, root)
    if not path.exists() and version.torch:  # a torch axis not published yet: its transformers has the same classes
        same = next(v for v in versions.supported() if v.minor == version.minor and not v.torch)
        path = published_path(same, root)
    if not path.exists():
        raise JobsError(f"{path}: no published matrix of transformers {version.transformers} to take its classes "
                        f"from; plan it where it is installed (its venv's `conformance jobs list --env {version.env}`)")
    from conformance.discover import matching

    rows = report.load_envelope(path)["models"]
    names = sorted(rows)
    patterns = [p.strip() for p in models.split(",") if p.strip()]
    if not patterns:
        return names
    # A name this version's matrix lacks selects nothing here (the class may be newer): no error, as before.
    index, types = {n: n for n in names}, {n: row.get("model_type", "") for n, row in rows.items()}
    chosen = set().union(*(matching(p, index, types) for p in patterns))
    return [n for n in names if n in chosen]


# --------------------------------------------------------------------------- the list


@dataclass(frozen=True)
class Request:
    """What a publishing run is asked for (the command line's selection)."""

    envs: tuple[str, ...]
    groups: tuple[str, ...] = ()
    extras: str = "installed"
    checks: tuple[str, ...] = ()
    models: str = ""
    budget: float = DEFAULT_BUDGET
    shards: dict = field(default_factory=dict)  # group (or "*") -> shards, instead of the budget's
    workers: int = DEFAULT_WORKERS
    out_dir: str = OUT_DIR
    target: str = TARGET
    pytest_args: tuple[str, ...] = ()


def install_line(version: versions.Version, group: Group, root: Path) -> tuple[str, str]:
    """(constraints file, extras) of the README's install command for a job: the version's pins; for the gate's
    version with an extra, that extra's pins where constraints/<extra>.txt exists (it includes the gate's)."""
    constraints = version.constraints
    if group.extra and version.is_gate and (root / "constraints" / f"{group.extra}.txt").exists():
        constraints = f"{group.extra}.txt"
    return constraints, ",".join(["dev", *([group.extra] if group.extra else [])])


def _job(request: Request, version: versions.Version, group: Group, index: int, total: int, classes: list[str],
         seconds: dict[str, float], root: Path, narrowed: bool = False) -> dict:
    name = f"{group.name}-{'+'.join(group.checks)}-{index}of{total}" if narrowed else f"{group.name}-{index}of{total}"
    out = f"{request.out_dir}/{version.env}/{name}.json"
    command = ["python", "-m", "pytest", request.target, *group.pytest_args()]
    command += ["--models", request.models] if request.models else []
    command += ["--shard", f"{index}/{total}"] if total > 1 else []
    command += ["-n", str(request.workers), "--dist", "loadgroup"] if request.workers > 1 else []
    command += ["--matrix-out", out, *request.pytest_args]
    constraints, extras = install_line(version, group, root)
    wall = shards.plan(classes, seconds, float("inf"), request.workers).wall_seconds
    return {"id": f"{version.env}-{name}", "env": version.env, "transformers": version.transformers,
            "group": group.name, "checks": list(group.checks), "backend": group.backend, "dtype": group.dtype,
            "extra": group.extra,
            "shard": f"{index}/{total}", "classes": classes, "cell_seconds": shards.expected_seconds(classes, seconds),
            "wall_seconds": wall, "command": command, "out": out, "constraints": constraints, "extras": extras,
            "install": f"pip install -c constraints/{constraints} -e '.[{extras}]'"}


def plan(request: Request, root: Path, names_of=None) -> dict:
    """The job list of `request` (see the module's contract). `names_of(version)` gives the classes of a version
    (default: discovered where it is installed, else its published matrix's)."""
    from conformance.checks.common.registry import check_ids, describe

    chosen, not_run = choose_groups(column_groups(), list(request.groups), request.extras)
    if request.checks:
        kept = {g.name for g in column_groups(list(request.checks))}
        left = {c for g in chosen if g.main_columns for c in g.checks if c not in request.checks}
        chosen = [g for g in column_groups(list(request.checks)) if g.name in {c.name for c in chosen} & kept]
        why = f"not in this publishing run (--checks {','.join(request.checks)})"
        not_run = {c: not_run.get(c, why) for c in check_ids() if c in not_run or c in left}
    if not chosen:
        raise JobsError("no column group left to run: check --groups, --extras and --checks")
    names_of = names_of or (lambda version: default_names(version, request, root))
    whole = {g.name: g.checks for g in column_groups()}
    listed, jobs = [], []
    for version in map(version_of, request.envs):
        names = names_of(version)
        for group in chosen:
            seconds = shards.published_estimates(checks=list(group.checks), backend=group.backend)
            total = request.shards.get(group.name) or request.shards.get("*") or \
                shards.plan(names, seconds, request.budget, request.workers).shards
            for index in range(1, total + 1):
                classes = shards.share_of(names, f"{index}/{total}", seconds) if total > 1 else list(names)
                jobs.append(_job(request, version, group, index, total, classes, seconds, root,
                                 narrowed=group.checks != whole[group.name]))
        listed.append({"env": version.env, "transformers": version.transformers, "classes": len(names),
                       "merged": f"{request.out_dir}/{version.env}.json", "not_run": not_run,
                       "check_info": describe(list(not_run))})
    walls = [job["wall_seconds"] for job in jobs]
    return {"schema": SCHEMA, "budget": request.budget, "workers": request.workers, "groups": [g.name for g in chosen],
            "seconds_from": provenance.portable(str(shards.PUBLISHED)) if shards.PUBLISHED.exists() else "",
            "env": dict(RUN_ENV), "versions": listed, "jobs": jobs,
            "wall_seconds": {"one_machine": round(sum(walls), 1), "runners": max(walls, default=0.0)}}


def default_names(version: versions.Version, request: Request, root: Path) -> list[str]:
    """The classes a version's runs take: discovered and selected by --models where that version is installed."""
    here = versions.installed()
    if here is None or here.env != version.env:
        return published_classes(version, root, request.models)
    from conformance.cases.case import TransformersCases
    from conformance.run.options import UsageError, select_models

    options = SimpleNamespace(models=request.models, changed_files=[], since="", transformers_repo="")
    try:
        return select_models(PytestOptions(options), TransformersCases())
    except UsageError as exc:
        raise JobsError(str(exc)) from None


def github_matrix(joblist: dict) -> dict:
    """The `strategy.matrix` of a GitHub Actions job that runs each entry on its own runner."""
    keys = ("id", "env", "group", "constraints", "extras", "out")
    return {"include": [{k: job[k] for k in keys} for job in joblist["jobs"]]}


def load(path: Path) -> dict:
    """The job list in `path`, or JobsError naming the file and the fix."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise JobsError(f"{path}: no such file; write a job list with `conformance jobs list -o {path}`") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise JobsError(f"{path}: not a readable job list ({exc}); write it again with `conformance jobs list`") \
            from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("jobs"), list):
        raise JobsError(f"{path}: not a job list (schema {SCHEMA!r}); write one with `conformance jobs list`")
    return data


def of_versions(joblist: dict, envs: list[str]) -> dict:
    """The part of `joblist` that `envs` name (see the module's contract)."""
    held = [v["env"] for v in joblist.get("versions", [])]
    unknown = [env for env in envs if env not in held]
    if unknown:
        raise JobsError(f"--env: the job list has no version {unknown[0]!r}; it has {', '.join(held) or 'none'}")
    jobs = [job for job in joblist["jobs"] if job["env"] in envs]
    walls = [job.get("wall_seconds", 0.0) for job in jobs]
    return {**joblist, "versions": [v for v in joblist["versions"] if v["env"] in envs], "jobs": jobs,
            "wall_seconds": {"one_machine": round(sum(walls), 1), "runners": max(walls, default=0.0)}}


def redealt(joblist: dict, published: Path | None = None) -> list[str]:
    """The ids of the list's sharded jobs whose ``--shard i/N`` would now take other classes than their entries list.

    A shard deals its group's classes by the published seconds (`run.shards.PUBLISHED`, or `published`: the file a
    job running under another root reads); a publication between planning the list and running a job changes them,
    and `jobs publish` then refuses that job's run. The group's classes are the union of its shards' entries."""
    matrix = Path(published or shards.PUBLISHED)
    envelope = report.load_envelope(matrix) if matrix.exists() else {"models": {}}
    sharded = [job for job in joblist["jobs"] if job.get("classes") and not job.get("shard", "1/1").endswith("/1")]
    def key(job: dict) -> tuple:
        return job["env"], job["group"], tuple(job["checks"]), job["shard"].split("/")[1]
    universe: dict[tuple, set[str]] = {}
    for job in sharded:
        universe.setdefault(key(job), set()).update(job["classes"])
    seconds: dict[tuple, dict[str, float]] = {}
    found = []
    for job in sharded:
        by = (tuple(job["checks"]), job["backend"])
        if by not in seconds:
            seconds[by] = shards.estimates(envelope, list(job["checks"]), job["backend"])
        if shards.share_of(sorted(universe[key(job)]), job["shard"], seconds[by]) != job["classes"]:
            found.append(job["id"])
    return found
