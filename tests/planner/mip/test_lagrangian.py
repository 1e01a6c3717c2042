"""The Lagrangian bound (:func:`planner.mip.relax.lagrangian_bound`): the LP's duals price
the rows projects share, each project's own problem is branched; valid and tighter."""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
import pytest

from models import Snapshot
from planner.mip import plan_epoch, relax
from planner.mip.backends import lp_backend
from planner.mip.backends.base import Capabilities, LpCapable, LpSession
from planner.mip.epoch import build_epoch
from planner.mip.formulation import apply
from planner.mip.model import LinearModel
from planner.mip.relax import lagrangian_bound, lp_available, solve_integer, solve_open_parts

from .conftest import SnapBuilder

pytestmark = pytest.mark.skipif(not lp_available(), reason="no LP-capable backend")


def a_step_between_jobs() -> Snapshot:
    """One 8-GPU node. ``a`` (owed 9 GPUs: first utility step at 180 quanta) has two
    3-GPU jobs of 120 quanta each over the epoch; ``b`` (owed 8, ratio 1.8, so its
    slopes are below ``a``'s) has eight 1-GPU jobs. The LP runs 1.5 of ``a``'s jobs, to
    its step exactly, and 3.5 of ``b``'s: 225,540. Whole jobs: 215,280."""
    b = SnapBuilder().pool(nodes=1).project("a", owed=9).project("b", owed=8, ratio=1.8)
    b.queued("a1", "a", gpus=3).queued("a2", "a", gpus=3)
    for i in range(8):
        b.queued(f"b{i}", "b", gpus=1)
    return b.build()


def test_lagrangian_bound_is_tighter_than_the_lp_and_valid() -> None:
    """Priced capacity, ``a`` alone cannot stop at 1.5 jobs: the bound falls from the
    LP's 225,540 to the optimum 215,280 itself (both projects solved). Which bound it
    reaches depends on which of the LP's dual optima HiGHS returns (the capacity row's
    price): with HiGHS's presolve, which the LP runs go without, it was 218,670."""
    snapshot = a_step_between_jobs()
    f = apply(build_epoch(snapshot))
    lp = lp_backend()
    assert lp is not None
    session = lp.open_lp(f.model)
    assert session.run(5.0)
    assert session.objective() == pytest.approx(225_540)
    lag = lagrangian_bound(
        f.model, f.coupling_rows(), session.values(), session.duals(), time.perf_counter() + 5.0, lp
    )
    assert (lag.branched, lag.closed) == (2, 2)
    assert lag.bound == pytest.approx(215_280, abs=1.0)
    optimum = plan_epoch(snapshot, rel_gap=0.0).solver.objective
    assert optimum == pytest.approx(215_280)
    assert optimum <= lag.bound < session.objective()


def test_lagrangian_bound_with_no_time_is_the_lp_bound() -> None:
    """Stopped before any project is branched, it is the LP bound (a valid bound)."""
    f = apply(build_epoch(a_step_between_jobs()))
    lp = lp_backend()
    assert lp is not None
    session = lp.open_lp(f.model)
    assert session.run(5.0)
    lag = lagrangian_bound(
        f.model, f.coupling_rows(), session.values(), session.duals(), time.perf_counter(), lp
    )
    assert lag.branched == 0
    assert lag.bound == pytest.approx(session.objective(), rel=1e-6)


def _step_lp() -> tuple[tuple[Any, ...], LpCapable]:
    """The step instance's model, coupling rows and LP optimum (values and duals), and the
    LP backend that solved it."""
    f = apply(build_epoch(a_step_between_jobs()))
    lp = lp_backend()
    assert lp is not None
    session = lp.open_lp(f.model)
    assert session.run(5.0)
    return (f.model, f.coupling_rows(), session.values(), session.duals()), lp


class BranchingOnly:
    """The registry's LP backend declaring LP relaxations only (no ``integer_parts``):
    the bound's parts are branched on their LPs."""

    name = "branching-only"
    capabilities = Capabilities(lp_relaxation=True)

    def __init__(self, lp: LpCapable) -> None:
        self.lp = lp

    def is_available(self) -> bool:
        return True

    def open_lp(self, model: LinearModel, objective: Any = None) -> LpSession:
        return self.lp.open_lp(model, objective)


def test_a_deeper_pass_closes_the_projects_the_first_left_open() -> None:
    """With only the root LPs in the first pass (``nodes=-1``: no branching), ``a`` and
    ``b`` stay open at their LP values, the LP bound 225,540; a second pass of 10
    branchings on the open parts (allowed whatever share closed: ``close_share=0``)
    closes both and reaches the bound of the full branching, 215,280 (the test above)."""
    args, registered = _step_lp()
    lp = BranchingOnly(registered)
    shallow = lagrangian_bound(*args, time.perf_counter() + 5.0, lp, nodes=-1)
    assert shallow.closed == 0
    assert shallow.bound == pytest.approx(225_540, abs=1.0)
    deep = lagrangian_bound(
        *args, time.perf_counter() + 5.0, lp, nodes=-1, deeper=10, close_share=0.0
    )
    assert deep.closed == 2
    assert deep.bound == pytest.approx(215_280, abs=1.0)


def test_no_deeper_pass_when_too_few_parts_closed() -> None:
    """The second pass runs only where at least ``close_share`` (40%) of the branched
    parts closed: with none closed, the root LPs' bound 225,540 stays."""
    args, registered = _step_lp()
    gated = lagrangian_bound(*args, time.perf_counter() + 5.0, BranchingOnly(registered), nodes=-1, deeper=10)
    assert gated.closed == 0
    assert gated.bound == pytest.approx(225_540, abs=1.0)


def test_open_parts_solved_exactly_close_what_the_root_lps_left_open() -> None:
    """With only root LPs (``nodes=-1``) both projects stay open at the LP bound 225,540;
    solved as integers by a backend that declares ``integer_parts``
    (:func:`solve_open_parts`), both close at the full branching's bound, 215,280."""
    args, lp = _step_lp()
    assert lp.capabilities.integer_parts
    shallow = lagrangian_bound(*args, time.perf_counter() + 5.0, lp, nodes=-1)
    assert len(shallow.open_parts) == 2
    exact = solve_open_parts(args[0], shallow, time.perf_counter() + 5.0, lp)
    assert (exact.closed, exact.open_parts) == (2, ())
    assert exact.bound == pytest.approx(215_280, abs=1.0)


def test_open_parts_with_no_time_keep_their_bound() -> None:
    """Stopped before any part, the bound is the one it was given (still valid)."""
    args, lp = _step_lp()
    shallow = lagrangian_bound(*args, time.perf_counter() + 5.0, lp, nodes=-1)
    same = solve_open_parts(args[0], shallow, time.perf_counter(), lp)
    assert same.bound == pytest.approx(shallow.bound)
    assert len(same.open_parts) == 2


def _hard_knapsack() -> LinearModel:
    """60 items in six knapsacks of random weights, each half full: HiGHS proves no
    optimum in 10 s (it runs to any time limit it is given)."""
    rng = np.random.default_rng(3)
    m = LinearModel()
    xs = [m.add_var(f"x{i}", 0, 1) for i in range(60)]
    w = rng.integers(1000, 2000, size=(6, 60))
    for r in range(6):
        m.add_constraint([(x, float(w[r, i])) for i, x in enumerate(xs)], "<=", float(w[r].sum() // 2))
    for i, x in enumerate(xs):
        m.add_objective(x, float(w[:, i].sum() + rng.integers(0, 100)))
    return m


def _parts_process_ready() -> None:
    if not relax.PARTS_PROCESS.wait_ready(60.0):
        pytest.fail("the parts process did not start in 60 s")


def test_a_part_that_would_run_past_the_deadline_is_stopped_there() -> None:
    """A part's MIP given 30 s by its own limit but due at the deadline 0.3 s away: its
    process is stopped at the deadline, the part proves nothing (``None``: it keeps the
    bound it had), and the next part is solved by a fresh process."""
    lp = lp_backend()
    assert lp is not None
    _parts_process_ready()
    first = relax.PARTS_PROCESS.call(os.getpid, (), 5.0)
    hard = _hard_knapsack()
    t0 = time.perf_counter()
    assert relax._integer_part(lp, hard, hard.objective_vector(), 30.0, t0 + 0.3) is None
    assert time.perf_counter() - t0 < 5.0
    _parts_process_ready()
    assert relax.PARTS_PROCESS.call(os.getpid, (), 5.0) != first
    small = _infeasible_side()
    answer = relax._integer_part(lp, small, small.objective_vector(), 5.0, time.perf_counter() + 5.0)
    assert answer is not None and answer.exact
    assert answer.bound == pytest.approx(3.0)


def test_a_part_solved_in_the_parts_process_matches_one_solved_here() -> None:
    """The same part, in the parts process and in this one: the same optimum."""
    lp = lp_backend()
    assert lp is not None
    _parts_process_ready()
    args, _ = _step_lp()
    model = args[0]
    there = relax._integer_part(lp, model, model.objective_vector(), 5.0, time.perf_counter() + 5.0)
    here = solve_integer(lp, model, model.objective_vector(), 5.0)
    assert there is not None and here is not None
    assert there.exact and here.exact
    assert there.bound == pytest.approx(here.bound)


def test_parts_beside_close_the_open_parts_by_the_deadline() -> None:
    """The step instance's two open parts, solved beside (in the parts process, from a
    thread): both close, at the full branching's bound, 215,280."""
    args, lp = _step_lp()
    shallow = lagrangian_bound(*args, time.perf_counter() + 5.0, lp, nodes=-1)
    beside = relax.PartsBeside(args[0], shallow, time.perf_counter() + 30.0, lp)
    exact = beside.result(time.perf_counter() + 30.0)
    assert (exact.closed, exact.open_parts) == (2, ())
    assert exact.bound == pytest.approx(215_280, abs=1.0)


def test_stopped_parts_beside_keep_the_bound_they_were_given() -> None:
    """Stopped as it starts on a part HiGHS cannot close (a 30 s deadline, each part
    at most 0.25 s): the result, asked for at once, is the bound it was given."""
    lp = lp_backend()
    assert lp is not None
    _parts_process_ready()
    hard = _hard_knapsack()
    values = np.zeros(hard.num_vars)
    part = relax.OpenPart(np.arange(hard.num_vars), tuple(range(len(hard.constraints))),
                          hard.objective_vector(), 1e9)
    given = relax.Lagrangian(1e9, 1, 1, 0, 0.0, values, (part,))
    beside = relax.PartsBeside(hard, given, time.perf_counter() + 30.0, lp)
    beside.stop()
    assert beside.result(time.perf_counter()).bound == 1e9


def _infeasible_side() -> LinearModel:
    """max 3x + 2y over integers 0..1 with 2x + 2y <= 3 and 2x - 2y >= 1: the LP stops
    at x = 1, y = 0.5 (4); y >= 1 leaves no point at all (x would need 1.5), y <= 0 gives
    x = 1, the integer optimum 3."""
    m = LinearModel()
    x, y = m.add_var("x", 0, 1), m.add_var("y", 0, 1)
    m.add_constraint([(x, 2), (y, 2)], "<=", 3)
    m.add_constraint([(x, 2), (y, -2)], ">=", 1)
    m.add_objective(x, 3)
    m.add_objective(y, 2)
    return m


def test_a_branch_with_no_point_is_pruned_and_the_part_closes() -> None:
    """An infeasible side of a branching holds nothing to bound: the branching goes on
    with the other side and closes the part at its integer optimum, 3, not at the LP's
    4 (before, any child the LP did not solve ended the part at its parent's value)."""
    m = _infeasible_side()
    lp = lp_backend()
    assert lp is not None
    session = lp.open_lp(m)
    assert session.run(5.0)
    assert session.objective() == pytest.approx(4.0)
    lag = lagrangian_bound(m, [], session.values(), session.duals(), time.perf_counter() + 5.0, lp)
    assert (lag.branched, lag.closed) == (1, 1)
    assert lag.bound == pytest.approx(3.0, abs=1e-5)
    assert list(lag.values) == pytest.approx([1.0, 0.0])


def test_an_lp_session_tells_infeasible_from_unsolved() -> None:
    """``infeasible()`` is true only after a run that proved the LP has no point."""
    m = _infeasible_side()
    lp = lp_backend()
    assert lp is not None
    session = lp.open_lp(m)
    assert session.run(5.0) and not session.infeasible()
    session.set_bounds(np.array([1]), np.array([1.0, 1.0]), np.array([1.0, 1.0]))
    assert not session.run(5.0)
    assert session.infeasible()
