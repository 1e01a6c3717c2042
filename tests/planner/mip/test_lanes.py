"""A decomposed epoch's parts planned side by side, one lane process per core."""

from __future__ import annotations

import os
import pickle
import signal
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from planner.mip import lanes, plan_epoch
from planner.mip.backends.cpsat import CpSatBackend
from planner.mip.backends.isolate import Isolated, SolverDied
from planner.mip.lanes import part_limit

from .test_lp_guided import medium_snapshot
from .test_properties import check_plan


def test_a_part_gets_its_share_of_the_lane_time_left() -> None:
    """60 s to the deadline, another lane busy for 12 s more: 108 lane-seconds left, of
    which a part of 3,000 of the 30,000 jobs left gets a tenth; the last part may take
    all of its lane's time, not the other lane's too."""
    assert part_limit(0.0, 60.0, [12.0], 3_000, 30_000) == pytest.approx(10.8)
    assert part_limit(40.0, 60.0, [50.0], 2_000, 2_000) == pytest.approx(20.0)
    assert part_limit(61.0, 60.0, [0.0], 10, 10) == 0.0


def test_a_lane_backend_is_one_worker_in_the_lane_itself_and_picklable() -> None:
    """CP-SAT's lane copy searches with one worker and no solver process of its own
    (the lane is the process), and travels to the lane by pickle."""
    lane = CpSatBackend().for_lane()
    assert (lane.workers, lane.isolate) == (1, False)
    assert pickle.loads(pickle.dumps(lane)).workers == 1


def test_the_parts_of_a_lane_that_dies_are_planned_after_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When a lane's process dies, the epoch still has a valid plan of every part: the
    other lane plans the parts still queued, the dead lane's part is planned in this
    process afterwards, and the message says so."""
    calls: list[int] = []
    real = Isolated.call

    def one_dies(self: Isolated, fn: Any, args: tuple[Any, ...], timeout: float) -> Any:
        if fn.__name__ != "plan_part":  # the solver process of the parts planned after
            return real(self, fn, args, timeout)
        calls.append(len(args[0].jobs))
        if len(calls) == 1:
            raise SolverDied("the solver process died (exit code -6)")
        return real(self, fn, args, timeout)

    monkeypatch.setattr(Isolated, "call", one_dies)
    snapshot = medium_snapshot()
    plan = plan_epoch(snapshot, time_limit=8.0, decompose=3, lanes=2)
    assert len(calls) == 3  # one part each, the dead lane's first, then the live one's
    assert "planned in 2 lanes" in plan.solver.message
    assert "1 part(s) planned after: lane failed: the solver process died" in plan.solver.message
    assert not plan.solver.fallback
    check_plan(snapshot, plan)


def test_ctrl_c_while_the_lanes_plan_ends_them_at_once(
    benchmark_script: Callable[[str], ModuleType],
) -> None:
    """A KeyboardInterrupt in the caller while both lanes plan parts of a cold 3,000-job
    epoch (given a minute and no gap to stop at) reaches the caller within seconds, and
    the lanes' processes are gone."""
    snapshot = benchmark_script("families").family_snapshot("cold", 1)
    lanes.warm(2)
    timer = threading.Timer(1.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    t0 = time.perf_counter()
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            plan_epoch(snapshot, time_limit=60.0, rel_gap=0.0, decompose=3, lanes=2)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert time.perf_counter() - t0 < 10.0
    procs = lanes._lane_processes(2)
    for proc in procs:
        assert proc._proc is None or proc._proc.wait(timeout=5) is not None
