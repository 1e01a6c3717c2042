"""The planner never crashes for solver trouble: it falls back to the greedy plan."""

from __future__ import annotations

import time
from typing import Any

import pytest

from models import SolveStatus
from planner.mip import plan_epoch, reserve_seconds
from planner.mip.backends import Capabilities, SolveResult
from planner.mip.model import LinearModel

from .conftest import SnapBuilder
from .test_properties import FailingBackend, check_plan


class NoAnswer:
    """A backend that returns no solution: by default it runs out of time first."""

    name = "no-answer"
    capabilities = Capabilities()

    def __init__(self, status: SolveStatus = SolveStatus.NO_SOLUTION, message: str = "time limit"):
        self.status = status
        self.message = message

    def is_available(self) -> bool:
        return True

    def solve(self, model: LinearModel, *, time_limit: float, rel_gap: float) -> SolveResult:
        return SolveResult(self.status, None, None, None, time_limit, self.message)


def busy_snapshot() -> Any:
    return (
        SnapBuilder()
        .pool(nodes=2)
        .project("a", owed=8, ratio=0.0)
        .project("b", owed=8)
        .running("r1", ("c-h100-000",), "b", ran=600.0, resumable=True)
        .queued("a1", "a")
        .queued("a2", "a", gpus=16)
        .queued("b1", "b", gpus=4)
        .build()
    )


def contended_snapshot() -> Any:
    """A small model (well under ``LP_GUIDED_VARS``) whose LP optimum is fractional: 2
    pools, 3 projects, 12 queued jobs."""
    b = SnapBuilder(now=0.0).pool("c", "H100", nodes=2).pool("d", "B200", nodes=1)
    for p, ratio in (("a", 0.0), ("b", 0.5), ("c", 1.5)):
        b.project(p, owed=8.0, ratio=ratio)
    b.running("r0", ("c-h100-000",), "c", gpus=8, ran=7200.0, resumable=True)
    for i in range(12):
        b.queued(f"q{i}", "abc"[i % 3], gpus=(1, 2, 4, 8)[i % 4], duration=1800.0 * (1 + i % 3))
    return b.build()


def test_solver_error_falls_back_to_greedy() -> None:
    """A backend that raises yields the greedy plan, flagged, with the error in the message."""
    snapshot = busy_snapshot()
    plan = plan_epoch(snapshot, backend=FailingBackend())
    assert plan.solver.fallback
    assert plan.solver.status is SolveStatus.ERROR
    assert "solver crashed" in plan.solver.message
    check_plan(snapshot, plan)


def test_no_incumbent_falls_back_to_greedy() -> None:
    """A time limit with no incumbent yields the greedy plan with status no_solution."""
    snapshot = busy_snapshot()
    plan = plan_epoch(snapshot, backend=NoAnswer())
    assert plan.solver.fallback
    assert plan.solver.status is SolveStatus.NO_SOLUTION
    check_plan(snapshot, plan)


def test_greedy_fallback_leaves_no_gpu_idle_that_waiting_work_fits() -> None:
    """The fallback still fills the free node: r1 continues on one node, a1 takes the other."""
    plan = plan_epoch(busy_snapshot(), backend=FailingBackend())
    first = {a.job for a in plan.slices[0].assignments}
    assert {"r1", "a1"} <= first


def test_tiny_time_limit_still_returns_a_valid_plan() -> None:
    """A time limit of a millisecond returns quickly with some valid plan."""
    snapshot = busy_snapshot()
    t0 = time.perf_counter()
    plan = plan_epoch(snapshot, time_limit=0.001)
    assert time.perf_counter() - t0 < 5.0
    check_plan(snapshot, plan)


class Recorder(NoAnswer):
    """:class:`NoAnswer` that keeps the time limit it was given."""

    given: float | None = None

    def solve(self, model: LinearModel, *, time_limit: float, rel_gap: float) -> SolveResult:
        self.given = time_limit
        return super().solve(model, time_limit=time_limit, rel_gap=rel_gap)


def test_a_short_time_limit_leaves_the_solver_most_of_it() -> None:
    """A 0.5 s plan of a small epoch hands its backend at least 0.3 s: with a fixed 0.3 s
    kept back for the steps after the solve it got at most 0.2 s, and on ai2-like CP-SAT
    then found no answer in most epochs. (The target gap is 0 so that the LP's rounding,
    which comes first under a short limit, does not end the plan before the search.)"""
    backend = Recorder()
    plan_epoch(contended_snapshot(), backend=backend, time_limit=0.5, rel_gap=0.0)
    assert backend.given is not None and backend.given >= 0.3


def test_the_time_kept_after_the_solve_shrinks_with_short_limits() -> None:
    """The margin kept besides the steps after the solve is 0.3 s from a 3 s limit up and
    a tenth of the limit below it."""
    assert reserve_seconds(0.0, 10.0) == pytest.approx(0.3)
    assert reserve_seconds(0.0, 3.0) == pytest.approx(0.3)
    assert reserve_seconds(0.0, 0.5) == pytest.approx(0.05)
    assert reserve_seconds(0.2, 10.0) == pytest.approx(0.6)  # 1.5 times the greedy's time


def test_unknown_backend_name_is_an_error() -> None:
    """An unknown backend name raises KeyError naming the known ones."""
    with pytest.raises(KeyError, match="cpsat"):
        plan_epoch(busy_snapshot(), backend="gurobi")


def test_nothing_to_decide_is_trivial() -> None:
    """With no queue and only contract-bound work, the plan is trivial and not a fallback."""
    snapshot = (
        SnapBuilder().pool().project("a").running("r1", ("c-h100-000",), ran=60.0, resumable=False).build()
    )
    plan = plan_epoch(snapshot)
    assert plan.solver.status is SolveStatus.TRIVIAL
    assert not plan.solver.fallback
    assert all([a.job for a in s.assignments] == ["r1"] for s in plan.slices)


def test_greedy_fallback_values_free_work_inside_the_owed_share() -> None:
    """The greedy plan gives the only node to a's free job, inside a's owed share, not to
    b's funded job borrowed past a zero share.

    Next-quantum gains (ratio 1, weight 1): a1 free, a's work 0 < target 320 quanta:
    work 5 + free slope 200 = 205; b1 funded past b's zero target: 5 + 25 = 30 (the
    optimum of the conformance case ``free_within_share`` is the same plan).
    """
    snapshot = (
        SnapBuilder()
        .pool()
        .project("a", owed=8)
        .project("b", owed=0)
        .queued("a1", "a", min_runtime=0.0)
        .queued("b1", "b")
        .build()
    )
    plan = plan_epoch(snapshot, backend=FailingBackend())
    assert plan.solver.fallback
    assert [[a.job for a in s.assignments] for s in plan.slices] == [["a1"]] * 4
    check_plan(snapshot, plan)


def test_charged_objective_equals_objective_when_headroom_is_ample() -> None:
    """With headroom to spare, the plan charges every funded slice: both objectives agree."""
    snapshot = SnapBuilder().pool(nodes=2).project("a", headroom=1e6).queued("a1", "a").build()
    plan = plan_epoch(snapshot)
    assert plan.solver.charged_objective is not None
    assert plan.solver.charged_objective == plan.solver.objective


def test_charged_objective_counts_whole_slices_only() -> None:
    """3 GPU-h of headroom (120 quanta) cover 1.5 slices of an 8-GPU job (80 quanta each):
    the model, like the plan, charges one whole slice, so both objectives agree.

    Charged 80 quanta at slope 800: 64000; uncharged 240 inside the 320-quanta share at
    200: 48000; work 320 * 5 = 1600; total 113600.
    """
    snapshot = SnapBuilder().pool(nodes=2).project("a", headroom=3.0).queued("a1", "a").build()
    plan = plan_epoch(snapshot, rel_gap=0.0)
    charged = [a.charged for s in plan.slices for a in s.assignments if a.job == "a1"]
    assert charged == [True, False, False, False]
    assert plan.solver.objective == pytest.approx(113_600)
    assert plan.solver.charged_objective == plan.solver.objective


def test_the_model_picks_which_slices_to_charge() -> None:
    """Headroom of 160 quanta, a running 12-GPU job (120 per slice) and a new 8-GPU job
    (80 per slice): charging in precedence order (running first) would charge 120 and
    leave 40 unspent; the model charges two 80-quanta slices of the new job, and the
    plan charges exactly those.

    Owed 40 GPUs (target 1600, first segment to 800, slope 800): charged 160 * 800 =
    128000; uncharged 640 of the 800 quanta of work at 200: 128000; work 800 * 5 = 4000;
    total 260000 (in precedence order: 96000 + 136000 + 4000 = 236000).
    """
    snapshot = (
        SnapBuilder()
        .pool(nodes=2, gpus_per_node=16)
        .project("a", owed=40, headroom=4.0)
        .running("r1", ("c-h100-000",), "a", gpus=12, ran=7200.0)
        .queued("a1", "a")
        .build()
    )
    plan = plan_epoch(snapshot, rel_gap=0.0)
    charged = {
        (a.job, k) for k, s in enumerate(plan.slices) for a in s.assignments if a.charged
    }
    assert charged == {("a1", 0), ("a1", 1)}
    assert plan.solver.objective == pytest.approx(260_000)
    assert plan.solver.charged_objective == plan.solver.objective
    check_plan(snapshot, plan)
