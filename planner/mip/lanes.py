"""Plan a decomposed epoch's parts side by side: one lane (a solver process) per core.

A decomposed epoch (:mod:`planner.mip.decompose`) has parts that share nothing but the
projects' fair-share targets, which the split has already divided. Planned one after
another, each part's model, LP and Lagrangian bound run on one core while the other
idles (about half of a part's time on the 30,000-job family). In lanes, each core plans
parts with a one-worker search, so every phase of every part has a core: a lane that
is done takes the next part from a queue shared by all lanes.

Each lane is a fresh interpreter (:class:`~planner.mip.backends.isolate.Isolated`, as
the CP-SAT solver process is), so a solver that aborts takes down only its lane: the
part it was planning is planned by the caller afterwards, the queue by the other lanes.

A part aims at :data:`PART_GAP` of the target gap: the parts that reach it early leave
their time to the parts still queued, and the whole lands within the target although
some parts do not (measured on the 30,000-job family: ``docs/formulation.md``).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

from models import Plan, Snapshot
from planner.mip.backends.base import Backend, Laned
from planner.mip.backends.isolate import Isolated, SolverDied, Unavailable

#: Each part's gap target, as a share of the epoch's.
PART_GAP = 0.8
#: Seconds a lane may answer after the epoch's deadline before it counts as hung.
LANE_GRACE = 5.0


def cores() -> int:
    """The cores this process may run on."""
    with contextlib.suppress(AttributeError, OSError):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def part_limit(now: float, deadline: float, others_busy_until: Sequence[float],
               jobs: int, jobs_left: int) -> float:
    """Seconds for a part of ``jobs`` jobs that a lane free at ``now`` takes, when
    ``jobs_left`` jobs (this part's included) are not yet planned and the other lanes
    are busy until ``others_busy_until``: its share, by jobs, of the lane time left to
    the ``deadline``, and no more than this lane's."""
    mine = max(deadline - now, 0.0)
    capacity = mine + sum(max(deadline - max(t, now), 0.0) for t in others_busy_until)
    return min(capacity * jobs / max(jobs_left, 1), mine)


def plan_part(part: Snapshot, backend: Backend, time_limit: float, rel_gap: float,
              previous: Plan | None) -> Plan:
    """One part's plan (runs in a lane's process)."""
    from planner.mip import plan_epoch

    return plan_epoch(part, backend=backend, time_limit=time_limit, rel_gap=rel_gap,
                      previous=previous, decompose=1)


def import_planner() -> bool:
    """A lane's first task: load the planner and its solvers while the parent splits."""
    import planner.mip  # noqa: F401
    from planner.mip.backends.cpsat import import_ortools

    return import_ortools()


#: The lane processes of this process, started on first use and kept (as the solver
#: process is): the second epoch does not pay for their start.
_LANES: list[Isolated] = []
_LANES_LOCK = threading.Lock()


def _lane_processes(n: int) -> list[Isolated]:
    with _LANES_LOCK:
        while len(_LANES) < n:
            _LANES.append(Isolated(startup=import_planner))
        return _LANES[:n]


def warm(n: int) -> None:
    """Start ``n`` lane processes without waiting for them."""
    for lane in _lane_processes(n):
        lane.warm()


def close() -> None:
    """Stop the lane processes."""
    with _LANES_LOCK:
        for lane in _LANES:
            lane.close()
        _LANES.clear()


atexit.register(close)


def plan_in_lanes(
    parts: Sequence[Snapshot],
    backend: Laned,
    lanes: int,
    deadline: float,
    rel_gap: float,
    previous: Plan | None,
) -> list[Plan | str]:
    """Each part's plan, planned in ``lanes`` processes at once, or for a part a lane
    could not plan, why (the caller plans it).

    The parts wait in one queue, largest first; a lane that is done takes the next,
    with its share of the lane time left (:func:`part_limit`), so a lane whose parts
    end early does not idle while another still has several to plan. Each of the last
    parts (one per lane) may run to the deadline.
    """
    n = min(lanes, len(parts))
    procs = _lane_processes(n)
    one = backend.for_lane()
    out: list[Plan | str] = ["not planned"] * len(parts)
    queue = sorted(range(len(parts)), key=lambda i: (-len(parts[i].jobs), i))
    busy_until = [0.0] * n
    jobs_left = [sum(len(p.jobs) for p in parts)]
    lock = threading.Lock()

    def run(lane: int) -> None:
        while True:
            with lock:
                if not queue:
                    return
                i = queue.pop(0)
                now = time.monotonic()
                jobs = len(parts[i].jobs)
                if len(queue) < n:
                    # One of the last parts: no lane takes another after it, so it may
                    # have all of its lane's time (the others have theirs).
                    limit = max(deadline - now, 0.0)
                else:
                    limit = part_limit(now, deadline, busy_until[:lane] + busy_until[lane + 1:],
                                       jobs, jobs_left[0])
                jobs_left[0] -= jobs
                busy_until[lane] = now + limit
            args: tuple[Any, ...] = (parts[i], one, max(limit, 0.5), rel_gap * PART_GAP, previous)
            try:
                out[i] = procs[lane].call(plan_part, args, timeout=max(limit, 0.5) + LANE_GRACE)
            except (SolverDied, Unavailable, RuntimeError) as exc:
                out[i] = f"lane failed: {exc}"
                with lock:
                    busy_until[lane] = deadline  # no more time from this lane
                return  # its other parts go to the other lanes, or to the caller
            with lock:
                busy_until[lane] = 0.0

    threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(n)]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except BaseException:
        # Ctrl-C reaches this thread, not the lanes' calls: end them now, not at their
        # parts' time limits.
        for proc in procs:
            proc.kill()
        raise
    return out
