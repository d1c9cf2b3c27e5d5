"""`--dist loadgroup` that survives a crashed worker (pytest-xdist <= 3.8).

pytest-xdist's LoadScopeScheduling (which loadgroup extends), when a worker
dies, puts the worker's whole workload back on the queue: the test it
crashed on (so the replacement worker runs it again and crashes again, until
--max-worker-restart ends the run) and the groups it had finished (sent
later as empty work, on which the session hangs forever). And a worker only
runs an item once it knows the next one, so a replacement given a single
item waits forever (pytest-xdist issues 1323, 1327, 1378; PR 1371).

Contract of `CrashTolerantGroupScheduling`: the crashed test is reported
once (by the controller, as xdist does) and never rerun; only groups with
tests left are requeued; a worker is never left holding exactly one pending
item while more work or a shutdown could be sent.
"""

from __future__ import annotations

from xdist.scheduler.loadgroup import LoadGroupScheduling


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
        super()._reschedule(node)
        if node not in self.registered_collections:  # still collecting: scheduled when it is done
            return
        # A worker starts an item only when it has the next one or a shutdown.
        while not node.shutting_down and self._pending_of(self.assigned_work[node]) < 2:
            if not self.workqueue:
                node.shutdown()
                return
            self._assign_work_unit(node)
