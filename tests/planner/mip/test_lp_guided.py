"""Large epochs go LP-guided: LP bound, rounding, the backend in neighbourhoods of the incumbent."""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import planner.mip as planner_mip
from models import Snapshot, SolveStatus
from planner.mip import LP_GUIDED_VARS, SHORT_LIMIT, _cap_charges, _lift_work, plan_epoch
from planner.mip.backends import lp_backend
from planner.mip.backends.base import LpSession, SolveResult, each_gap
from planner.mip.backends.cpsat import CpSatBackend
from planner.mip.columns import ColumnSet, Master, restricted_master
from planner.mip.epoch import build_epoch
from planner.mip.formulation import Formulation, apply
from planner.mip.model import LinearModel
from planner.mip.relax import lp_available, solve_relaxation

from .conftest import SnapBuilder
from .test_cuts import two_one_slice_projects
from .test_fallback import NoAnswer, contended_snapshot
from .test_properties import FailingBackend, check_plan

pytestmark = pytest.mark.skipif(not lp_available(), reason="HiGHS (highspy) missing")


def medium_snapshot(seed: int = 0) -> Snapshot:
    """3 pools of 6 nodes, 8 projects, 220 queued and some running jobs (seeded)."""
    rng = np.random.default_rng(seed)
    b = SnapBuilder(now=3600.0)
    b.pool("c", "H100", nodes=6).pool("d", "B200", nodes=6).pool("e", "H100", nodes=6, gpus_per_node=4)
    for i in range(8):
        b.project(f"p{i}", owed=float(rng.integers(4, 16)), ratio=float(rng.uniform(0, 2)),
                  headroom=float(rng.choice([2.0, 10.0, 1000.0])))
    for i in range(6):
        b.running(f"r{i}", (f"c-h100-{i:03d}",), f"p{i}", gpus=8, ran=float(rng.choice([600.0, 7200.0])),
                  resumable=bool(rng.integers(2)))
    for i in range(220):
        b.queued(
            f"q{i:03d}",
            f"p{int(rng.integers(8))}",
            int(rng.choice([1, 2, 4, 8, 16])),
            duration=float(rng.choice([900.0, 1800.0, 3600.0, 7200.0])),
            min_runtime=float(rng.choice([0.0, 600.0, 1800.0])),
            priority=int(rng.integers(0, 3)),
            submit=float(rng.choice([0.0, 1800.0, 3600.0])),
            resumable=bool(rng.integers(2)),
        )
    return b.build()


def test_medium_epoch_is_lp_guided_and_valid() -> None:
    """A model above the threshold is solved LP-guided; the plan keeps every invariant."""
    snapshot = medium_snapshot()
    assert apply(build_epoch(snapshot)).model.num_vars > LP_GUIDED_VARS
    plan = plan_epoch(snapshot, time_limit=10.0)
    assert not plan.solver.fallback
    assert plan.solver.status in (SolveStatus.FEASIBLE, SolveStatus.OPTIMAL)
    assert "LP (pulp)" in plan.solver.message and "roundings: " in plan.solver.message
    assert plan.solver.bound is not None and plan.solver.objective is not None
    assert plan.solver.bound >= plan.solver.objective
    assert plan.solver.gap is not None and plan.solver.gap < 0.05
    check_plan(snapshot, plan)


def test_a_dead_search_keeps_the_rounded_plan() -> None:
    """When the neighbourhood search dies, the plan is the LP rounding's, not the greedy fallback."""
    snapshot = medium_snapshot()
    dying = NoAnswer(SolveStatus.ERROR, "the solver process died")
    plan = plan_epoch(snapshot, backend=dying, time_limit=10.0, rel_gap=0.0)
    assert not plan.solver.fallback
    assert plan.solver.status is SolveStatus.FEASIBLE
    assert "without an answer (error: the solver process died)" in plan.solver.message
    check_plan(snapshot, plan)


def test_a_search_that_raises_keeps_the_best_plan_placed_before_it() -> None:
    """A backend that raises in the first neighbourhood search (after the LP rounding
    was placed) leaves the rounded plan as the answer, unflagged and without a bound,
    the error named in the message: not the greedy fallback."""
    snapshot = medium_snapshot()
    plan = plan_epoch(snapshot, backend=FailingBackend(), time_limit=10.0, rel_gap=0.0)
    assert not plan.solver.fallback
    assert plan.solver.status is SolveStatus.FEASIBLE and plan.solver.bound is None
    kept = re.search(r"ended by an error \(RuntimeError\('solver crashed'\)\); the best plan placed before it \((.*?)\) is kept", plan.solver.message)
    assert kept is not None and kept[1] in ("Lagrangian rounding", "LP rounded up from 0.70")
    assert plan.solver.objective is not None
    check_plan(snapshot, plan)


def test_the_time_after_the_last_search_solves_the_open_lagrangian_parts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Searches that find nothing run until less than a search's second is left; the
    parts the Lagrangian bound left open are solved beside them and in that time (with
    no deeper branching, two of seed 2's eight, offline), and the message says so. The
    plan stays valid."""
    monkeypatch.setattr(planner_mip, "LAGRANGIAN_DEEPER", 0)
    snapshot = medium_snapshot(2)
    plan = plan_epoch(snapshot, backend=NoAnswer(SolveStatus.NO_SOLUTION, "nothing"), time_limit=3.0, rel_gap=0.0)
    assert "open Lagrangian parts solved exactly" in plan.solver.message
    assert "then the Lagrangian parts solved exactly beside the searches and in the time left" in plan.solver.message
    check_plan(snapshot, plan)


def test_a_lagrangian_rounding_takes_the_place_of_the_later_lp_roundings() -> None:
    """With time for the Lagrangian bound, the LP is rounded once (from 0.7) and the
    Lagrangian point's rounding follows; 0.6 and 0.5 are not tried."""
    snapshot = medium_snapshot()
    plan = plan_epoch(snapshot, backend=NoAnswer(SolveStatus.NO_SOLUTION, "nothing"), time_limit=3.0, rel_gap=0.0)
    assert "roundings: rounded up from 0.70: gap " in plan.solver.message
    assert "Lagrangian rounding: gap " in plan.solver.message
    assert "rounded up from 0.60" not in plan.solver.message
    check_plan(snapshot, plan)


def test_without_a_lagrangian_rounding_every_lp_rounding_is_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Lagrangian bound that solved no project gives no rounding: the LP is rounded
    from 0.6 and 0.5 as well, after the bound."""
    from planner.mip.relax import lagrangian_bound

    monkeypatch.setattr(planner_mip, "lagrangian_bound", lambda *a, **k: dataclasses.replace(lagrangian_bound(*a, **k), closed=0))
    snapshot = medium_snapshot()
    plan = plan_epoch(snapshot, backend=NoAnswer(SolveStatus.NO_SOLUTION, "nothing"), time_limit=3.0, rel_gap=0.0)
    assert "Lagrangian rounding" not in plan.solver.message
    assert "roundings: rounded up from 0.70: gap " in plan.solver.message
    for up in ("0.60", "0.50"):
        assert f"rounded up from {up}: gap " in plan.solver.message
    check_plan(snapshot, plan)


def test_the_restricted_master_runs_in_place_of_a_pair_of_searches() -> None:
    """With the searches side by side (CP-SAT's two workers), the columns found beside
    them feed the restricted master once, in a round of its own; the plan stays valid."""
    snapshot = medium_snapshot()
    plan = plan_epoch(snapshot, time_limit=10.0, rel_gap=0.0)
    assert "restricted master: " in plan.solver.message
    assert "restricted master: no columns" not in plan.solver.message
    check_plan(snapshot, plan)


class _Recorded(CpSatBackend):
    """CP-SAT that records, per call of ``solve_many``, how many of the models are
    restricted masters (their variables are named ``column[...]``) and their sizes, and
    the ``rel_gap`` each model of the call is asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.masters: list[int] = []
        self.master_vars: list[int] = []
        self.gaps: list[list[float]] = []

    def solve_many(
        self, models: list[LinearModel], *, time_limit: float, rel_gap: float | Sequence[float]
    ) -> list[SolveResult]:
        masters = [m for m in models if any(n.startswith("column[") for n in m.names)]
        self.masters.append(len(masters))
        self.master_vars.extend(m.num_vars for m in masters)
        self.gaps.append(each_gap(rel_gap, len(models)))
        return super().solve_many(models, time_limit=time_limit, rel_gap=rel_gap)


def test_a_second_master_with_columns_that_start_one_more_job_runs_beside_the_first() -> None:
    """With the searches side by side and time to spare, the master over the dived
    columns and one over those and the columns that start one more job are searched
    at once: the second, the larger, by the LP backend's MIP, the first by CP-SAT (one
    master in its call); the plan stays valid."""
    snapshot = medium_snapshot()
    backend = _Recorded()
    plan = plan_epoch(snapshot, backend=backend, time_limit=10.0, rel_gap=0.0)
    said = re.search(r"(\d+) variables, beside it (\d+) with (\d+) columns that start one more job", plan.solver.message)
    assert said is not None and int(said.group(3)) > 0
    assert "searched by pulp's MIP" in plan.solver.message
    assert backend.masters[0] == 1
    # CP-SAT had the first master, the one without those columns.
    assert backend.master_vars[0] == int(said.group(1)) < int(said.group(2))
    check_plan(snapshot, plan)


def test_the_searches_stop_at_the_gap_that_what_the_plan_lacks_allows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each pair of neighbourhood searches asks the backend for the gap
    ``_search_gap`` gives for the plan's gap at that moment (here a marker value, which
    nothing else asks for: the masters keep an eighth of ``rel_gap``)."""
    seen: list[float] = []

    def marker(gap: float, rel_gap: float) -> float:
        seen.append(gap)
        return 0.0123

    monkeypatch.setattr(planner_mip, "_search_gap", marker)
    snapshot = medium_snapshot()
    backend = _Recorded()
    plan = plan_epoch(snapshot, backend=backend, time_limit=10.0, rel_gap=0.0)
    assert seen and sum(0.0123 in call for call in backend.gaps) == len(seen)
    check_plan(snapshot, plan)


def test_a_focus_search_is_searched_to_its_own_gap(monkeypatch: pytest.MonkeyPatch) -> None:
    """A focus search (the first of its pair: the odd rounds, the master being round 0)
    asks the backend for ``FOCUS_GAP`` (here a marker), the other search of its pair for
    what ``_search_gap`` gives (another marker), in every pair the message says holds
    one, and no other search asks for it."""
    monkeypatch.setattr(planner_mip, "_search_gap", lambda gap, rel_gap: 0.0123)
    monkeypatch.setattr(planner_mip, "FOCUS_GAP", 0.0456)
    monkeypatch.setattr(planner_mip, "FOCUS_SHARE", 0.0)  # every odd round that finds a project short
    snapshot = medium_snapshot()
    backend = _Recorded()
    plan = plan_epoch(snapshot, backend=backend, time_limit=10.0, rel_gap=0.0)
    focused = plan.solver.message.count("variables (room for ")
    assert focused > 0
    assert sum(call == [0.0456, 0.0123] for call in backend.gaps) == focused
    assert sum(call.count(0.0456) for call in backend.gaps) == focused
    check_plan(snapshot, plan)


class _EarlierMasters(CpSatBackend):
    """CP-SAT whose answer to a restricted master (variables named ``column[...]``) also
    lists its own last answer as an earlier one, as a search that found it twice."""

    def solve_many(self, models: list[LinearModel], *, time_limit: float, rel_gap: float) -> list[SolveResult]:
        found = super().solve_many(models, time_limit=time_limit, rel_gap=rel_gap)
        return [
            dataclasses.replace(r, earlier=(r.values,))
            if r.values is not None and any(n.startswith("column[") for n in m.names)
            else r
            for m, r in zip(models, found, strict=True)
        ]


def test_the_masters_earlier_answers_are_placed_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """An earlier answer of the second master is placed after the masters' own answers
    (here every one is near enough: EARLIER_SLACK the whole bound), and the message
    counts it; the plan stays valid."""
    monkeypatch.setattr(planner_mip, "EARLIER_SLACK", 1.0)
    snapshot = medium_snapshot()
    plan = plan_epoch(snapshot, backend=_EarlierMasters(), time_limit=10.0, rel_gap=0.0)
    assert "columns that start one more job" in plan.solver.message
    assert ", 1 earlier answer placed, gap " in plan.solver.message
    check_plan(snapshot, plan)


def test_each_part_of_every_plan_placed_before_the_masters_is_a_column_of_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """The masters get each part's piece of every plan placed before them (the greedy
    plan, the roundings) as a column, besides the dived ones; the message counts them."""
    placed: list[list[npt.NDArray[np.int64]]] = []
    handed: list[ColumnSet] = []
    search = planner_mip._master_search

    def recorded_search(*args: Any, **kwargs: Any) -> str:
        placed.append(list(args[7].plans))  # the _Best before the masters
        return search(*args, **kwargs)

    def recorded_master(
        model: LinearModel, coupling: list[int], found: ColumnSet, incumbent: npt.NDArray[np.int64]
    ) -> Master:
        handed.append(found)
        return restricted_master(model, coupling, found, incumbent)

    monkeypatch.setattr(planner_mip, "_master_search", recorded_search)
    monkeypatch.setattr(planner_mip, "restricted_master", recorded_master)
    snapshot = medium_snapshot()
    plan = plan_epoch(snapshot, time_limit=10.0, rel_gap=0.0)
    said = re.search(r"(\d+) from the plans placed", plan.solver.message)
    assert said is not None and int(said.group(1)) > 0
    assert len(placed[0]) >= 2  # the greedy plan and at least the LP rounding
    parts = handed[0].parts
    for values in placed[0]:
        for root in parts.rows:
            piece = values[parts.members[root]]
            assert any(np.array_equal(piece, col) for col in handed[0].columns[root])
    check_plan(snapshot, plan)


def test_a_master_with_too_little_time_for_a_second_runs_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the second master's columns would cut into the first's time (here: a
    master that may take all the time there is), the master runs alone."""
    monkeypatch.setattr(planner_mip, "MASTER_CAP", 60.0)
    snapshot = medium_snapshot()
    backend = _Recorded()
    plan = plan_epoch(snapshot, backend=backend, time_limit=10.0, rel_gap=0.0)
    assert "restricted master: " in plan.solver.message
    assert "columns that start one more job" not in plan.solver.message
    assert 2 not in backend.masters
    check_plan(snapshot, plan)


def test_a_lane_backend_gets_no_restricted_master() -> None:
    """A backend that searches one model at a time (a lane's) leaves the other cores to
    the other lanes: no columns are found beside it, and no master runs."""
    snapshot = medium_snapshot()
    plan = plan_epoch(snapshot, backend=CpSatBackend().for_lane(), time_limit=4.0, rel_gap=0.0)
    assert "restricted master" not in plan.solver.message
    check_plan(snapshot, plan)


def _lp_of(form: Formulation) -> tuple[LpSession, float, np.ndarray, np.ndarray]:
    lp = lp_backend()
    assert lp is not None
    session = lp.open_lp(form.model)
    assert session.run(5.0)
    return session, session.objective(), session.values(), session.duals()


def test_charge_caps_that_lower_the_lp_bound_are_kept() -> None:
    """On two one-slice projects (test_cuts) the capped LP is 30% lower: the bound is
    the capped LP's, and the model takes the caps."""
    snapshot = two_one_slice_projects()
    form = apply(build_epoch(snapshot))
    session, bound, values, duals = _lp_of(form)
    assert bound == pytest.approx(161_600)
    bound, _, _, note = _cap_charges(form, session, bound, values, duals, time.perf_counter() + 5.0)
    assert bound == pytest.approx(113_600)
    assert "charged-slice caps: the LP 29.703% lower, kept" in note
    capped = apply(build_epoch(snapshot))
    capped.cap_charges()
    assert [c.coefs.tolist() for c in form.model.constraints] == [c.coefs.tolist() for c in capped.model.constraints]


def test_charge_caps_that_move_the_lp_bound_too_little_are_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the caps take off less than CAP_GAIN (here made 50%), the first optimum
    stays, and the model and the LP session keep their coefficients."""
    monkeypatch.setattr(planner_mip, "CAP_GAIN", 0.5)
    snapshot = two_one_slice_projects()
    form = apply(build_epoch(snapshot))
    session, bound, values, duals = _lp_of(form)
    got = _cap_charges(form, session, bound, values, duals, time.perf_counter() + 5.0)
    assert got[0] == bound and got[1] is values and got[2] is duals
    assert "not kept" in got[3]
    loose = apply(build_epoch(snapshot))
    assert [c.coefs.tolist() for c in form.model.constraints] == [c.coefs.tolist() for c in loose.model.constraints]
    assert session.run(5.0)
    assert session.objective() == pytest.approx(161_600)


def test_lifted_work_cuts_are_kept_where_they_lower_the_lp_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the medium snapshot the lifted rows take 0.007% off the LP; with CAP_GAIN
    made 0 they are kept: the bound falls, and the model and the session end with the
    same rows, the cuts last."""
    monkeypatch.setattr(planner_mip, "CAP_GAIN", 0.0)
    form = apply(build_epoch(medium_snapshot(0)))
    rows = len(form.model.constraints)
    session, bound, values, duals = _lp_of(form)
    lower, _, new_duals, note = _lift_work(form, session, bound, values, duals, time.perf_counter() + 5.0)
    assert lower < bound
    assert "lifted work cuts:" in note and note.endswith(", kept")
    added = form.model.constraints[rows:]
    assert added and all(c.name.startswith("lifted[cut_") for c in added)
    assert len(new_duals) == len(form.model.constraints)


def test_lifted_work_cuts_that_move_the_lp_bound_too_little_are_dropped() -> None:
    """At the default CAP_GAIN (0.02%) the medium snapshot's cuts (0.007%) are not
    kept: the first optimum stays, and the model and the session lose the rows."""
    form = apply(build_epoch(medium_snapshot(0)))
    rows = len(form.model.constraints)
    session, bound, values, duals = _lp_of(form)
    got = _lift_work(form, session, bound, values, duals, time.perf_counter() + 5.0)
    assert got[0] == bound and got[1] is values and got[2] is duals
    assert got[3].endswith(", not kept")
    assert len(form.model.constraints) == rows
    assert session.run(5.0)
    assert session.objective() == pytest.approx(bound)
    assert len(session.duals()) == rows


def test_time_limit_is_honoured() -> None:
    """The whole call stays near its time limit (generous slack: the machine is shared)."""
    snapshot = medium_snapshot(1)
    t0 = time.perf_counter()
    plan = plan_epoch(snapshot, time_limit=1.0, rel_gap=0.0)
    assert time.perf_counter() - t0 < 3.0
    check_plan(snapshot, plan)


def knapsack() -> LinearModel:
    """max 5a + 4b + 3c, 2a + 3b + 2c <= 5, binary: LP 28/3 (b = 1/3), integer 9 (a, b)."""
    m = LinearModel()
    xs = [m.add_var(n, 0, 1) for n in "abc"]
    m.add_constraint(zip(xs, [2, 3, 2], strict=True), "<=", 5, "cap")
    for x, c in zip(xs, [5, 4, 3], strict=True):
        m.add_objective(x, c)
    return m


def test_relaxation_bound() -> None:
    """The LP relaxation's objective bounds the integer optimum from above."""
    relax = solve_relaxation(knapsack(), 5.0)
    assert relax is not None
    assert relax.bound == pytest.approx(28.0 / 3.0)


def test_a_small_epoch_under_a_short_limit_is_searched_whole_from_the_lp_rounding() -> None:
    """Under SHORT_LIMIT even a small model gets the LP bound and roundings first, and
    the backend then searches the whole model from the best of them."""
    snapshot = contended_snapshot()
    assert apply(build_epoch(snapshot)).model.num_vars <= LP_GUIDED_VARS
    plan = plan_epoch(snapshot, time_limit=0.5 * SHORT_LIMIT, rel_gap=0.0)
    assert not plan.solver.fallback
    assert "roundings: " in plan.solver.message
    assert "cpsat on the whole model from the LP rounding" in plan.solver.message
    assert plan.solver.bound is not None and plan.solver.objective is not None
    assert plan.solver.bound >= plan.solver.objective
    check_plan(snapshot, plan)


def test_under_a_short_limit_a_backend_without_an_answer_leaves_the_rounding() -> None:
    """With no answer from the backend in a short plan, the plan is the LP rounding's,
    not the greedy fallback (which it was when the backend started from the greedy)."""
    snapshot = contended_snapshot()
    plan = plan_epoch(snapshot, backend=NoAnswer(), time_limit=0.5 * SHORT_LIMIT, rel_gap=0.0)
    assert not plan.solver.fallback
    assert plan.solver.status in (SolveStatus.FEASIBLE, SolveStatus.OPTIMAL)
    assert "on the whole model from the LP rounding" in plan.solver.message
    assert "no answer (no_solution)" in plan.solver.message
    check_plan(snapshot, plan)


def test_a_small_epoch_with_time_is_solved_whole_from_the_greedy() -> None:
    """At SHORT_LIMIT and above a small model goes to the backend whole, with no LP."""
    plan = plan_epoch(contended_snapshot(), time_limit=2 * SHORT_LIMIT, rel_gap=0.0)
    assert "cpsat on the whole model: " in plan.solver.message
    assert "roundings: " not in plan.solver.message


def test_a_class_the_lp_starts_more_of_gets_one_more_first_slice_start_to_force() -> None:
    """The step instance: the LP starts 1.5 of ``a``'s two jobs and 3.5 of ``b``'s
    eight. Against an incumbent that starts none, each class gets its first-slice start
    held at 1; against one that starts both of ``a``'s jobs, only ``b``'s class."""
    from planner.mip import _one_more_start

    from .test_lagrangian import a_step_between_jobs

    f = apply(build_epoch(a_step_between_jobs()))
    relaxed = solve_relaxation(f.model, 5.0)
    assert relaxed is not None
    lp_values = relaxed.values
    table = f.start_table()
    first = {int(table.cls[i]): int(table.var[i]) for i in range(len(table.var)) if table.start[i] == 0}
    by_project = {c.project: c.index for c in f.epoch.classes}
    none = np.zeros(f.model.num_vars, dtype=np.int64)
    assert sorted(_one_more_start(f, lp_values, none)) == sorted(
        [(first[by_project["a"]], 1), (first[by_project["b"]], 1)]
    )
    both_a = none.copy()
    both_a[first[by_project["a"]]] = 2
    assert _one_more_start(f, lp_values, both_a) == [(first[by_project["b"]], 1)]


def test_the_first_master_is_the_lp_backends_mip_beside_cpsats_search_of_the_second() -> None:
    """Two masters at once: the first is solved by the LP backend's MIP from its start,
    the second by CP-SAT in its process; each answer at its model's optimum (the
    first's 3 from a start of 0, the second's 5)."""
    lp = lp_backend()
    assert lp is not None and lp.capabilities.integer_parts
    first = LinearModel()
    x, y = first.add_var("x", 0, 1), first.add_var("y", 0, 1)
    first.add_constraint([(x, 2), (y, 2)], "<=", 3)
    first.add_objective(x, 3)
    first.add_objective(y, 2)
    second = LinearModel()
    a, b = second.add_var("a", 0, 2), second.add_var("b", 0, 2)
    second.add_constraint([(a, 1), (b, 1)], "<=", 3)
    second.add_objective(a, 2)
    second.add_objective(b, 1)
    here, there = planner_mip._lp_beside(
        CpSatBackend(), lp, first, np.zeros(2, dtype=np.int64), second, 5.0, 0.0
    )
    assert here.values is not None and list(here.values) == [1, 0] and here.objective == pytest.approx(3.0)
    assert there.values is not None and list(there.values) == [2, 1] and there.objective == pytest.approx(5.0)
