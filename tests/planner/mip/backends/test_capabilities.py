"""Backends declare what they can do; the planner asks only for what is declared."""

from __future__ import annotations

from typing import Any

import pytest

from models import SolveStatus
from planner.mip import plan_epoch
from planner.mip.backends import BACKENDS, Capabilities, Laned, LpCapable, lp_backend
from planner.mip.backends.base import Concurrent, SolveResult, each_gap
from planner.mip.backends.cpsat import CpSatBackend
from planner.mip.model import LinearModel
from planner.mip.relax import lp_available

from ..conftest import SnapBuilder
from ..test_lp_guided import medium_snapshot


def test_every_registered_backend_declares_capabilities() -> None:
    """Each backend in the registry carries a Capabilities object."""
    for backend in BACKENDS.values():
        assert isinstance(backend.capabilities, Capabilities)


def test_cpsat_declares_its_search_features_and_no_lp() -> None:
    """CP-SAT takes hints and a stop-at objective, reports earlier incumbents, plans in
    lanes and searches as many models at once as it has workers; it has no LP."""
    caps = BACKENDS["cpsat"].capabilities
    assert caps.names() == [
        "warm_start", "hints", "earlier_incumbents", "stop_at_bound", "prestart", "lanes", "concurrent"
    ]
    assert caps.concurrent == 2
    assert isinstance(BACKENDS["cpsat"], Laned)
    assert isinstance(BACKENDS["cpsat"], Concurrent)
    assert not caps.lp_relaxation


def test_a_lane_copy_of_cpsat_searches_one_model_at_a_time() -> None:
    """A lane has one core: its one-worker copy declares no concurrent searches."""
    lane = CpSatBackend().for_lane()
    assert lane.capabilities.concurrent == 0
    assert "concurrent" not in lane.capabilities.names()


@pytest.mark.skipif(not lp_available(), reason="no LP-capable backend")
def test_registry_hands_out_an_lp_capable_backend() -> None:
    """The LP-guided path gets its LP from a backend that declares lp_relaxation."""
    lp = lp_backend()
    assert lp is not None and isinstance(lp, LpCapable)
    assert lp.capabilities.lp_relaxation
    m = LinearModel()
    a = m.add_var("a", 0, 1)
    m.add_constraint([(a, 2)], "<=", 1)
    m.add_objective(a, 3)
    session = lp.open_lp(m)
    assert session.run(5.0)
    assert session.objective() == pytest.approx(1.5)


@pytest.mark.skipif(not lp_available(), reason="no LP-capable backend")
def test_the_lp_backend_declares_integer_parts() -> None:
    """PuLP with HiGHS solves its LP sessions as MIPs too: the Lagrangian bound's parts."""
    lp = lp_backend()
    assert lp is not None
    assert lp.capabilities.integer_parts


class Recorder:
    """A backend that declares nothing and records what it is asked to solve."""

    name = "recorder"
    capabilities = Capabilities()

    def __init__(self) -> None:
        self.calls: list[tuple[dict[int, int], int | None]] = []

    def is_available(self) -> bool:
        return True

    def solve(self, model: LinearModel, *, time_limit: float, rel_gap: float) -> SolveResult:
        self.calls.append((dict(model.hint), model.stop_at))
        return SolveResult(SolveStatus.NO_SOLUTION, None, None, None, 0.0, "recorded")


@pytest.mark.skipif(not lp_available(), reason="no LP-capable backend")
def test_undeclared_features_are_not_asked_for() -> None:
    """A backend without hints or stop-at-bound gets neither, in the neighbourhood searches too."""
    recorder = Recorder()
    plan = plan_epoch(medium_snapshot(), backend=recorder, time_limit=4.0, rel_gap=0.0)
    assert recorder.calls
    assert all(hint == {} and stop_at is None for hint, stop_at in recorder.calls)
    assert not plan.solver.fallback


def test_a_backend_without_lanes_plans_the_parts_one_after_another() -> None:
    """A decomposed epoch asks only a backend that declares ``lanes`` for lane copies:
    the recorder's parts are solved here, in this process, each by the recorder."""
    recorder = Recorder()
    plan = plan_epoch(medium_snapshot(), backend=recorder, time_limit=3.0, decompose=2, lanes=2)
    assert recorder.calls
    assert "lanes" not in plan.solver.message


def small() -> Any:
    return SnapBuilder().pool().project("a").queued("a1", "a").build()


def test_message_says_what_ended_a_direct_solve() -> None:
    """A small model solved to optimality says so."""
    plan = plan_epoch(small(), rel_gap=0.0)
    assert "ended by cpsat on the whole model: proved optimal" in plan.solver.message


def test_message_says_what_ended_a_fallback() -> None:
    """A backend without an answer: the message names it and the greedy plan."""
    plan = plan_epoch(small(), backend=Recorder())
    assert plan.solver.fallback
    assert "ended by recorder gave no answer (no_solution): the greedy plan is returned" in plan.solver.message


@pytest.mark.skipif(not lp_available(), reason="no LP-capable backend")
def test_message_says_what_ended_an_lp_guided_search() -> None:
    """An LP-guided epoch names the phase that ended it (the LP rounding or a search) and why."""
    plan = plan_epoch(medium_snapshot(), time_limit=6.0)
    ended = plan.solver.message.split("ended by ", 1)[1]
    assert ended.startswith(("LP rounding", "neighbourhood search"))
    assert any(w in ended for w in ("within the target", "time limit", "left, below"))


class PairRecorder(Recorder):
    """A backend that searches two models at once and records how it was asked."""

    capabilities = Capabilities(warm_start=True, hints=True, concurrent=2)

    def __init__(self) -> None:
        super().__init__()
        self.many: list[int] = []
        self.inner = CpSatBackend(isolate=False)

    def solve(self, model: LinearModel, *, time_limit: float, rel_gap: float) -> SolveResult:
        self.calls.append((dict(model.hint), model.stop_at))
        return self.inner.solve(model, time_limit=time_limit, rel_gap=rel_gap)

    def solve_many(
        self, models: list[LinearModel], *, time_limit: float, rel_gap: float
    ) -> list[SolveResult]:
        # The restricted masters (variables named ``column[...]``) are not neighbourhoods.
        if not any(n.startswith("column[") for m in models for n in m.names):
            self.many.append(len(models))
        return self.inner.solve_many(models, time_limit=time_limit, rel_gap=rel_gap)


@pytest.mark.skipif(not lp_available(), reason="no LP-capable backend")
def test_a_concurrent_backend_gets_the_neighbourhoods_two_at_a_time() -> None:
    """The LP-guided search hands a backend declaring ``concurrent`` two neighbourhoods
    per call, says so in the message, and the plan is as valid as ever."""
    pair = PairRecorder()
    plan = plan_epoch(medium_snapshot(), backend=pair, time_limit=6.0, rel_gap=0.0)
    assert pair.many and set(pair.many) == {2}
    assert "(side by side)" in plan.solver.message
    assert not plan.solver.fallback
    assert plan.solver.gap is not None


@pytest.mark.skipif(not lp_available(), reason="no LP-capable backend")
def test_a_backend_without_concurrent_gets_one_neighbourhood_at_a_time() -> None:
    """A backend that declares no concurrent searches is never asked for two at once."""
    recorder = Recorder()
    plan = plan_epoch(medium_snapshot(), backend=recorder, time_limit=3.0, rel_gap=0.0)
    assert recorder.calls
    assert "(side by side)" not in plan.solver.message


def test_solve_many_takes_one_gap_for_all_or_one_per_model() -> None:
    """``rel_gap`` of ``solve_many`` is one gap for every model or a gap per model
    (``each_gap``); a list of the wrong length is an error, not a silent zip."""
    assert each_gap(0.01, 2) == [0.01, 0.01]
    assert each_gap(0, 1) == [0.0]
    assert each_gap([0.01, 0.0001], 2) == [0.01, 0.0001]
    with pytest.raises(ValueError, match="1 gaps for 2 models"):
        each_gap([0.01], 2)
