"""The LP's split large gang held in its best branch (planner.mip.branching)."""

from __future__ import annotations

import numpy as np
import pytest

from models import Snapshot, SolveStatus
from planner.mip import GANG_DROP, _hold_gang
from planner.mip.backends.cpsat import CpSatBackend
from planner.mip.backends.highs_lp import HighsLp, highs_available
from planner.mip.branching import Guide, guide_by_gangs, hold, release
from planner.mip.epoch import build_epoch
from planner.mip.formulation import Formulation, apply

from .conftest import SnapBuilder

pytestmark = pytest.mark.skipif(not highs_available(), reason="needs HiGHS")


def split_gang() -> Snapshot:
    """One pool of 8 nodes (64 GPUs). Project ``a`` is owed 32 GPUs and has one 64-GPU
    gang queued; ``b`` is owed 32 and has eight 8-GPU jobs. The LP gives ``a`` half the
    gang (its utility ends at 32 GPUs) and ``b`` four jobs; a plan runs either the gang
    or ``b``'s jobs."""
    builder = SnapBuilder().pool(nodes=8).project("a", owed=32).project("b", owed=32)
    builder.queued("gang", "a", gpus=64, duration=3600.0, min_runtime=900.0)
    for i in range(8):
        builder.queued(f"b{i}", "b", gpus=8, duration=3600.0, min_runtime=900.0)
    return builder.build()


def gang_starts(f: Formulation) -> list[int]:
    (cls,) = [c.index for c in f.epoch.classes if c.gpus == 64]
    return [v for (c, _, _), v in sorted(f.x.items()) if c == cls]


def lp_of(f: Formulation, fix: dict[int, tuple[int, int]]) -> float:
    lp = HighsLp(f.model)
    lower = np.asarray(f.model.lower, dtype=np.float64)
    upper = np.asarray(f.model.upper, dtype=np.float64)
    for v, (lo, hi) in fix.items():
        lower[v], upper[v] = lo, hi
    lp.set_bounds(np.arange(f.model.num_vars), lower, upper)
    assert lp.run(10.0)
    return lp.objective()


def guided() -> tuple[Formulation, HighsLp, Guide]:
    f = apply(build_epoch(split_gang()))
    session = HighsLp(f.model)
    assert session.run(10.0)
    values = session.values()
    assert 0.05 < values[gang_starts(f)].sum() < 0.95  # the LP splits the gang
    guide = guide_by_gangs(f, session, values, session.duals(), session.objective(), float("inf"))
    return f, session, guide


def test_the_split_gang_is_held_in_the_branch_whose_lp_is_highest() -> None:
    f, _, guide = guided()
    starts = gang_starts(f)
    ((cls, where),) = guide.held
    held = guide.bounds[cls]
    # Every branch by hand: each start the LP gives the gang, and none of them.
    lp = HighsLp(f.model)
    assert lp.run(10.0)
    split = [v for v in starts if lp.values()[v] >= 0.01]
    branches = [{v: (1, 1)} for v in split] + [{v: (0, 0) for v in split}]
    values = [lp_of(f, b) for b in branches]
    best = branches[int(np.argmax(values))]
    assert all(held[v] == best[v] for v in best)
    assert (where is None) == (len(best) == len(split) and all(b == (0, 0) for b in best.values()))
    assert guide.objective == pytest.approx(max(values), rel=1e-9)
    assert guide.bound == pytest.approx(max(values), rel=1e-9)
    # The model itself keeps its own bounds: the hold is the guide's.
    assert all(f.model.lower[v] == 0 and f.model.upper[v] == 1 for v in starts)


def test_an_incumbent_that_moves_the_gang_gets_the_model_bounds_back() -> None:
    f, _, guide = guided()
    ((cls, _),) = guide.held
    bounds = dict(guide.bounds[cls])
    held = hold(f.model, guide)
    assert all((held.lower[v], held.upper[v]) == b for v, b in bounds.items())
    keeps = np.zeros(f.model.num_vars, dtype=np.int64)
    for v, (lo, _) in bounds.items():
        keeps[v] = lo
    assert release(held, f.model, guide, keeps) == 0
    assert all((held.lower[v], held.upper[v]) == b for v, b in bounds.items())
    moves = keeps.copy()
    for v, (lo, hi) in bounds.items():
        if lo == hi:
            moves[v] = 1 - lo
    assert release(held, f.model, guide, moves) == 1
    assert all((held.lower[v], held.upper[v]) == (f.model.lower[v], f.model.upper[v]) for v in bounds)
    assert guide.bounds == {}


def test_no_gang_is_held_where_the_lp_runs_every_large_gang_whole() -> None:
    snap = (
        SnapBuilder().pool(nodes=8).project("a", owed=64)
        .queued("gang", "a", gpus=64, duration=3600.0, min_runtime=900.0).build()
    )
    f = apply(build_epoch(snap))
    session = HighsLp(f.model)
    assert session.run(10.0)
    guide = guide_by_gangs(f, session, session.values(), session.duals(), session.objective(), float("inf"))
    assert guide.held == [] and guide.lps == 0


def test_the_gang_is_held_where_its_branch_lies_below_the_lp_by_gang_drop() -> None:
    """On the split gang every branch's LP lies well below the LP (0.02% is
    GANG_DROP): the gang is held, and the message says where and by how much."""
    f = apply(build_epoch(split_gang()))
    session = HighsLp(f.model)
    assert session.run(10.0)
    bound = session.objective()
    guide, tighter, note = _hold_gang(f, session, bound, session.values(), session.duals(), float("inf"))
    assert guide is not None and len(guide.held) == 1
    assert (bound - guide.objective) / bound >= GANG_DROP
    assert note.startswith("; large gang held: the 64-GPU gang of a ")
    assert f"the LP {(bound - guide.objective) / bound:.3%} lower)" in note
    assert guide.bound is not None and tighter == guide.bound < bound
    assert note.endswith(f"; the large gang's branches: the bound {(bound - tighter) / bound:.3%} lower")


def test_no_gang_is_held_where_its_branch_lies_less_than_gang_drop_below(monkeypatch: pytest.MonkeyPatch) -> None:
    """With GANG_DROP above the split gang's fall the branches count as a tie: no hold,
    and the message says why."""
    import planner.mip as mip

    monkeypatch.setattr(mip, "GANG_DROP", 0.99)
    f = apply(build_epoch(split_gang()))
    session = HighsLp(f.model)
    assert session.run(10.0)
    bound = session.objective()
    guide, tighter, note = _hold_gang(f, session, bound, session.values(), session.duals(), float("inf"))
    assert guide is None
    assert note.startswith("; large gang not held: the 64-GPU gang of a ")
    assert ", under 99.00%); the large gang's branches: the bound " in note
    assert tighter < bound  # the branches bound the MIP whether or not the gang is held


def test_the_branches_bound_is_no_lower_than_the_integer_optimum() -> None:
    """The branches cover every integer plan: the highest of their LPs, below the LP,
    is still above the MIP's optimum (solved exactly by CP-SAT)."""
    f, session, guide = guided()
    lp = HighsLp(f.model)
    assert lp.run(10.0)
    assert guide.bound is not None and guide.bound < lp.objective()
    exact = CpSatBackend().solve(f.model, time_limit=30.0, rel_gap=0.0)
    assert exact.status is SolveStatus.OPTIMAL and exact.objective is not None
    assert exact.objective <= guide.bound + 1e-6
