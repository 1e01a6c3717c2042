"""Plan a decomposed epoch's parts side by side: one lane (a solver process) per core.

A decomposed epoch (:mod:`planner.mip.decompose`) has parts that share nothing but the
projects' fair-share targets, which the split has already divided. Planned one after
another, each part's model, LP and Lagrangian bound run on one core while the other
idles (about half of a part's time on the 30,000-job family). In lanes, each core plans
its own parts with a one-worker search, so every phase of every part has a core.

Each lane is a fresh interpreter (:class:`~planner.mip.backends.isolate.Isolated`, as
the CP-SAT solver process is), so a solver that aborts takes down only its lane: that
lane's parts then get the greedy plan, and the epoch its other lanes' plans.

A part aims at :data:`PART_GAP` of the target gap: the parts that reach it early leave
their time to the lane's later parts, and the whole lands within the target although
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


def assign(sizes: Sequence[int], lanes: int) -> list[list[int]]:
    """Indices of ``sizes`` per lane, balanced: largest first, each to the least loaded
    lane; in each lane in their original order. Lanes left empty are dropped."""
    out: list[list[int]] = [[] for _ in range(lanes)]
    load = [0] * lanes
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        k = min(range(lanes), key=lambda k: (load[k], k))
        out[k].append(i)
        load[k] += sizes[i]
    return [sorted(lane) for lane in out if lane]


def plan_lane(
    parts: Sequence[Snapshot],
    backend: Backend,
    deadline: float,
    rel_gap: float,
    previous: Plan | None,
) -> list[Plan]:
    """Plan ``parts`` one after another by ``deadline`` (``time.monotonic``), each with
    its share (by job count) of the time left (runs in a lane's process)."""
    from planner.mip import plan_epoch

    jobs_left = sum(len(p.jobs) for p in parts)
    plans = []
    for part in parts:
        share = len(part.jobs) / max(jobs_left, 1)
        jobs_left -= len(part.jobs)
        left = deadline - time.monotonic()
        plans.append(plan_epoch(part, backend=backend, time_limit=max(left * share, 0.5),
                                rel_gap=rel_gap, previous=previous, decompose=1))
    return plans


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
    """Each part's plan, planned in ``lanes`` processes at once, or for the parts of a
    lane that failed, why (the caller gives them the greedy plan)."""
    groups = assign([len(p.jobs) for p in parts], lanes)
    procs = _lane_processes(len(groups))
    one = backend.for_lane()
    out: list[Plan | str] = ["not planned"] * len(parts)

    def run(proc: Isolated, idx: list[int]) -> None:
        args: tuple[Any, ...] = ([parts[i] for i in idx], one, deadline, rel_gap * PART_GAP, previous)
        try:
            plans = proc.call(plan_lane, args, timeout=max(deadline - time.monotonic(), 0.0) + LANE_GRACE)
        except (SolverDied, Unavailable, RuntimeError) as exc:
            for i in idx:
                out[i] = f"lane failed: {exc}"
            return
        for i, plan in zip(idx, plans, strict=True):
            out[i] = plan

    threads = [threading.Thread(target=run, args=(proc, idx), daemon=True)
               for proc, idx in zip(procs, groups, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out
