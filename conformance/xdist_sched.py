"""`--dist loadgroup` that survives a crashed worker (pytest-xdist <= 3.8).

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

from xdist.scheduler.loadgroup import LoadGroupScheduling


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
