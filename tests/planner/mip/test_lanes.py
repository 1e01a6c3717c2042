"""A decomposed epoch's parts planned side by side, one lane process per core."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from planner.mip import plan_epoch
from planner.mip.backends.cpsat import CpSatBackend
from planner.mip.backends.isolate import Isolated, SolverDied
from planner.mip.lanes import assign

from .test_lp_guided import medium_snapshot
from .test_properties import check_plan


def test_parts_are_dealt_largest_first_to_the_least_loaded_lane() -> None:
    """Sizes 5, 4, 3, 3, 1 in two lanes: 5 and 4 open them, the first 3 joins the 4, the
    second the 5, the 1 the lighter (ties to the first lane): 5+3 and 4+3+1, each lane in
    the parts' order; with more lanes than parts the empty ones are dropped."""
    assert assign([5, 4, 3, 3, 1], 2) == [[0, 3], [1, 2, 4]]
    assert assign([2, 7], 4) == [[1], [0]]


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
    dead lane's parts are planned in this process afterwards, and the message says so."""
    calls: list[int] = []
    real = Isolated.call

    def one_dies(self: Isolated, fn: Any, args: tuple[Any, ...], timeout: float) -> Any:
        if fn.__name__ != "plan_lane":  # the solver process of the parts planned after
            return real(self, fn, args, timeout)
        calls.append(len(args[0]))
        if len(calls) == 1:
            raise SolverDied("the solver process died (exit code -6)")
        return real(self, fn, args, timeout)

    monkeypatch.setattr(Isolated, "call", one_dies)
    snapshot = medium_snapshot()
    plan = plan_epoch(snapshot, time_limit=8.0, decompose=3, lanes=2)
    assert len(calls) == 2
    assert "planned in 2 lanes" in plan.solver.message
    assert "part(s) planned after: lane failed: the solver process died" in plan.solver.message
    assert not plan.solver.fallback
    check_plan(snapshot, plan)
