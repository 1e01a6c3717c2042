"""The formulation's cuts: valid for integer plans, they remove fractional LP points."""

from __future__ import annotations

import pytest

from models import Snapshot
from planner.mip import plan_epoch
from planner.mip.backends import get_backend
from planner.mip.epoch import build_epoch
from planner.mip.formulation import Formulation, apply
from planner.mip.model import Constraint
from planner.mip.relax import lp_available, solve_relaxation

from .conftest import SnapBuilder

needs_lp = pytest.mark.skipif(not lp_available(), reason="no LP-capable backend")


def row(f: Formulation, prefix: str) -> Constraint:
    (c,) = [c for c in f.model.constraints if c.name.startswith(prefix)]
    return c


def lhs(c: Constraint, point: dict[int, float]) -> float:
    return sum(float(a) * point.get(int(v), 0.0) for v, a in zip(c.vars, c.coefs, strict=True))


def three_nodes() -> Snapshot:
    """Three 8-GPU nodes, two queued 16-GPU gangs (two whole nodes each) of one class."""
    return (
        SnapBuilder()
        .pool(nodes=3)
        .project("a", owed=24)
        .queued("a1", "a", gpus=16, duration=3600.0)
        .queued("a2", "a", gpus=16, duration=3600.0)
        .build()
    )


def test_node_cut_removes_one_and_a_half_gangs() -> None:
    """On 3 free nodes the whole-node row ``2 x <= 3`` allows x = 1.5 gangs of 2 nodes;
    the node-count cut ``x <= floor(3 / 2) = 1`` does not."""
    f = apply(build_epoch(three_nodes()))
    x = f.x[(0, 0, 0)]  # the class, pool 0, started in slice 0 (runs all 4 slices)
    nodes = row(f, "whole_nodes[0,0]")
    cut = row(f, "cut_nodes[0,0,2]")
    fractional = {x: 1.5}
    assert lhs(nodes, fractional) <= nodes.rhs  # 3 <= 3: the row keeps it
    assert (cut.rhs, lhs(cut, fractional)) == (1, 1.5)  # 1.5 > 1: the cut removes it
    assert lhs(cut, {x: 1.0}) <= cut.rhs  # one whole gang stays allowed


@needs_lp
def test_node_cut_lowers_the_lp_bound_to_the_integer_optimum() -> None:
    """With the cuts the LP bound is the integer optimum here (one gang on two nodes)."""
    snapshot = three_nodes()
    f = apply(build_epoch(snapshot))
    relax = solve_relaxation(f.model, 5.0)
    without = apply(build_epoch(snapshot))
    without.model.constraints = [c for c in without.model.constraints if not c.name.startswith("cut_")]
    loose = solve_relaxation(without.model, 5.0)
    assert relax is not None and loose is not None
    plan = plan_epoch(snapshot, rel_gap=0.0)
    assert plan.solver.objective is not None
    assert relax.bound == pytest.approx(plan.solver.objective)
    assert loose.bound > relax.bound + 1.0


def test_capped_work_cut_removes_a_quarter_gang_filling_a_small_share() -> None:
    """A project owed 2 GPUs (target 80 quanta, first segment 40) whose only job is an
    8-GPU gang (320 quanta over the epoch): a quarter of the gang would fill the first
    segment (u0 = 40 <= w = 80 <= 320 / 4); the cut caps the gang's work in that segment
    at 40 per gang started, so a quarter gang fills only 10."""
    snapshot = SnapBuilder().pool().project("a", owed=2).queued("a1", "a").build()
    f = apply(build_epoch(snapshot))
    x = f.x[(0, 0, 0)]
    u0 = f.u[("a", 0)]
    cut = row(f, "cut_work[a,0]")
    quarter = {x: 0.25, u0: 40.0}
    assert lhs(cut, quarter) > cut.rhs  # 40 - 40 * 0.25 = 30 > 0
    assert lhs(cut, {x: 1.0, u0: 40.0}) <= cut.rhs  # the whole gang fills it


def test_cuts_keep_the_integer_optimum() -> None:
    """The cuts are valid: the conformance optimum of one job on one node is unchanged."""
    snapshot = SnapBuilder().pool().project("a", owed=2).queued("a1", "a").build()
    plan = plan_epoch(snapshot, rel_gap=0.0)
    # Charged 320 quanta: 40 at 800, 40 at 400, 80 at 100 (to 2T = 160), 160 at 25:
    # 60000; work 320 * 5 = 1600.
    assert plan.solver.objective == pytest.approx(61_600)


def test_charged_slices_stop_at_what_the_headroom_pays() -> None:
    """Headroom of 120 quanta, an 8-GPU job (80 quanta a slice) for the whole epoch: the
    charged-slice count ``y`` is at most ``floor(120 / 80) = 1``, so the LP point that
    charges 1.5 slices (all 120 quanta of headroom) is gone; integer plans charge at most
    one slice anyway."""
    snapshot = SnapBuilder().pool().project("a", owed=8, headroom=3.0).queued("a1", "a").build()
    epoch = build_epoch(snapshot)
    assert epoch.headroom_q["a"] == 120
    f = apply(epoch)
    y = f.y[("a", False, 80)]
    assert f.model.upper[y] == 1


def test_a_start_counts_at_most_the_slices_the_headroom_pays() -> None:
    """The same job starts for four slices of 80 quanta, but ``y <= 1``: capped, in
    ``y - n x <= 0`` its start counts 1, not 4, so the LP point that starts a quarter of
    the job and charges a whole slice for it is gone; an integer start makes room for
    ``y = 1`` either way."""
    snapshot = SnapBuilder().pool().project("a", owed=8, headroom=3.0).queued("a1", "a").build()
    f = apply(build_epoch(snapshot))
    y = f.y[("a", False, 80)]
    c = row(f, "charged_slices[a,0,80]")
    coefs = dict(zip(c.vars.tolist(), c.coefs.tolist(), strict=True))
    assert coefs.pop(y) == 1 and c.rhs == 0
    assert sorted(coefs.values()) == [-4, -3, -2, -1]  # a start in slice 0, 1, 2 or 3
    first = min(coefs, key=lambda v: coefs[v])  # the start in slice 0, a quarter of it
    assert lhs(c, {y: 1.0, first: 0.25}) <= c.rhs  # uncapped, a quarter start pays a slice
    f.cap_charges()
    c = row(f, "charged_slices[a,0,80]")
    capped = dict(zip(c.vars.tolist(), c.coefs.tolist(), strict=True))
    assert capped.pop(y) == 1 and set(capped.values()) == {-1}
    assert lhs(c, {y: 1.0, first: 0.25}) > c.rhs  # capped, it no longer does


def two_one_slice_projects() -> Snapshot:
    """Two projects, each with headroom for one slice, each with a job that would hold
    the one node all epoch."""
    return (
        SnapBuilder().pool().project("a", owed=8, headroom=3.0).project("b", owed=8, headroom=3.0)
        .queued("a1", "a").queued("b1", "b").build()
    )


@needs_lp
def test_capped_charges_take_the_lp_bound_to_the_integer_optimum() -> None:
    """On two one-slice projects, uncapped, the LP starts a quarter of each job and
    charges each a whole slice (161,600); capped, it charges a quarter slice per quarter
    start, and its bound is the integer optimum (113,600), which the caps leave
    unchanged."""
    snapshot = two_one_slice_projects()
    loose = apply(build_epoch(snapshot))
    capped = apply(build_epoch(snapshot))
    capped.cap_charges()
    solver = get_backend("cpsat")
    whole_loose = solver.solve(loose.model, time_limit=5.0, rel_gap=0.0)
    whole_capped = solver.solve(capped.model, time_limit=5.0, rel_gap=0.0)
    assert whole_loose.objective == whole_capped.objective == pytest.approx(113_600)
    lp_loose, lp_capped = solve_relaxation(loose.model, 5.0), solve_relaxation(capped.model, 5.0)
    assert lp_loose is not None and lp_capped is not None
    assert lp_loose.bound == pytest.approx(161_600)
    assert lp_capped.bound == pytest.approx(113_600)


def test_no_charged_slice_when_the_headroom_pays_for_none() -> None:
    """Headroom of 60 quanta buys no 80-quanta slice: no count, the job runs unallocated
    (the LP cannot charge three quarters of a slice)."""
    snapshot = SnapBuilder().pool().project("a", owed=8, headroom=1.5).queued("a1", "a").build()
    f = apply(build_epoch(snapshot))
    assert f.y == {} and f.w == {}
    plan = plan_epoch(snapshot, rel_gap=0.0)
    assert [a.charged for s in plan.slices for a in s.assignments] == [False] * 4
