"""Which cells run, in what order, on which worker.

Contracts:

* Collection keeps the cells of ``--checks`` and of the ``--shard i/N``
  share (`shards`), drops those of checks the run does not run (their
  required packages are missing, or an opt-in column --checks did not name:
  `Session.not_run`; no cell, no skip), then
  orders them: the cells of one class together, the
  longest classes first (by the published seconds), checks in column order;
  other tests after them, in their own order.
* The controller hands its class selection to each xdist worker (so no
  worker computes the impact graph again).
* ``--dist loadgroup`` uses `CrashTolerantGroupScheduling`, which survives a
  crashed worker (pytest-xdist <= 3.8):

pytest-xdist's LoadScopeScheduling (which loadgroup extends), when a worker
dies, puts the worker's whole workload back on the queue: the test it
crashed on (so the replacement worker runs it again and crashes again, until
--max-worker-restart ends the run) and the groups it had finished (sent
later as empty work, on which the session hangs forever). And a worker only
runs an item once it knows the next one, so a replacement given a single
item waits forever; and a replacement still collecting when another worker
dies is given work it cannot name, a KeyError that ends the run
(pytest-xdist issues 1189, 1323, 1327, 1378; PR 1371).

Contract of `CrashTolerantGroupScheduling`: the crashed test is reported
once (by the controller, as xdist does) and never rerun; only groups with
tests left are requeued; a worker is never left holding exactly one pending
item while more work or a shutdown could be sent; a worker gets work only
once its collection is in.

loadgroup tells the controller each test's group by appending ``@group`` to
its node id on the worker. From pytest 9.2 on, node ids are structured and
xdist's append no longer takes effect, so no test is grouped (pytest-xdist
issue 1386). `restore_group_suffix(items)`, run on a worker after xdist's
own hook, appends it where it is missing (records.plain_nodeid removes it
again, for records and for `pytest <nodeid>`).
"""

from __future__ import annotations

import pytest
from xdist.scheduler.loadgroup import LoadGroupScheduling

from conformance.checks.common.registry import check_ids
from conformance.run import shards
from conformance.run.cells import check_of, is_unselected, model_of
from conformance.run.session import SELECTED_KEY


def group_of(item) -> str | None:
    names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                    for m in item.iter_markers("xdist_group")})
    return "_".join(names) if names else None


def restore_group_suffix(items) -> None:
    """Give each item with an xdist_group mark the ``@group`` node id suffix loadgroup schedules by."""
    for item in items:
        group = group_of(item)
        if group is None or item.nodeid.endswith(f"@{group}"):
            continue
        structured = getattr(item, "_id", None)
        if structured is not None and hasattr(type(structured), "parse"):
            item._id = type(structured).parse(f"{item.nodeid}@{group}")


class CrashTolerantGroupScheduling(LoadGroupScheduling):
    def remove_node(self, node) -> str | None:
        workload = self.assigned_work.pop(node)
        crashitem = next((nodeid for unit in workload.values() for nodeid, done in unit.items() if not done), None)
        if crashitem is None:
            return None
        for unit in workload.values():
            if crashitem in unit:
                unit[crashitem] = True  # reported as crashed; running it again proves nothing
        for scope, unit in workload.items():
            if not all(unit.values()):
                self.workqueue[scope] = unit
        for other in self.assigned_work:
            self._reschedule(other)
        return crashitem

    def _reschedule(self, node) -> None:
        if node not in self.registered_collections:  # a replacement still collecting: scheduled when done
            return
        super()._reschedule(node)
        # A worker starts an item only when it has the next one or a shutdown.
        while not node.shutting_down and self._pending_of(self.assigned_work[node]) < 2:
            if not self.workqueue:
                node.shutdown()
                return
            self._assign_work_unit(node)


class OrderHooks:
    """Which cells run and in what order; one instance per pytest config."""

    def __init__(self, session):
        self.session = session

    def pytest_collection_modifyitems(self, session, config, items):
        checks, not_run = self.session.checks, self.session.not_run
        kept = [item for item in items if not (check_of(item) and checks and check_of(item) not in checks)
                and check_of(item) not in not_run and not is_unselected(item)]
        seconds = self.session.estimates()
        shard_spec = config.getoption("shard")
        if shard_spec:
            kept = shards.select_shard(kept, shard_spec, seconds, group=lambda item: model_of(item) or item.nodeid)
        order = {c: i for i, c in enumerate(check_ids())}
        rank = {m: i for i, m in enumerate(shards.longest_first(filter(None, map(model_of, kept)), seconds))}

        def key(item):
            model = model_of(item)
            return (0 if model else 1, rank.get(model, 0), order.get(check_of(item), len(order)), item.nodeid)

        kept.sort(key=key)
        if len(kept) != len(items):
            kept_ids = {id(i) for i in kept}
            config.hook.pytest_deselected(items=[i for i in items if id(i) not in kept_ids])
        items[:] = kept


class XdistHooks:
    """pytest-xdist: the workers' selection and groups, the crash-tolerant scheduler."""

    def __init__(self, session):
        self.session = session

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        if self.session.is_worker and getattr(config.option, "loadgroup", False):
            restore_group_suffix(items)  # after xdist's own hook, which no longer works on pytest >= 9.2

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node):
        """Hand the controller's impact selection to each worker, so no worker builds the code graph again."""
        if self.session._selection is not None:
            node.workerinput[SELECTED_KEY] = list(self.session._selection.classes)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config, log):
        if config.getvalue("dist") == "loadgroup":
            return CrashTolerantGroupScheduling(config, log)
        return None
