"""The next neighbourhood frees the job groups where LP and incumbent disagree most,
counting the utility each project has at stake (:func:`planner.mip._next_neighbourhood`)."""

from __future__ import annotations

import numpy as np
import pytest

import planner.mip as planner_mip
from planner.mip.epoch import build_epoch
from planner.mip.formulation import Formulation, apply
from planner.mip.model import LinearModel
from planner.mip.relax import Lagrangian

from .conftest import SnapBuilder


def two_projects() -> Formulation:
    """One 2-node pool; ``a`` and ``b`` each owed 8 GPUs with one queued 8-GPU job."""
    snapshot = (
        SnapBuilder()
        .pool(nodes=2)
        .project("a", owed=8)
        .project("b", owed=8)
        .queued("a1", "a")
        .queued("b1", "b")
        .build()
    )
    return apply(build_epoch(snapshot))


def lp_and_incumbent(f: Formulation) -> tuple[np.ndarray, np.ndarray]:
    """Incumbent: nothing runs. LP: 0.1 of ``a1`` and 0.5 of ``b1`` from slice 0, and 100
    quanta in ``a``'s first utility segment (slope 800): 80,000 at stake for ``a``, none
    for ``b``. A start's own objective is its bonuses only: 4 slices of 80 quanta at 5,
    1,600 per member, so 160 at stake in ``a1`` and 800 in ``b1``."""
    lp = np.zeros(f.model.num_vars)
    a, b = (next(c.index for c in f.epoch.classes if c.project == p) for p in "ab")
    lp[f.x[(a, 0, 0)]] = 0.1
    lp[f.x[(b, 0, 0)]] = 0.5
    lp[f.u[("a", 0)]] = 100.0
    return lp, np.zeros(f.model.num_vars, dtype=np.int64)


def freed_project(f: Formulation, chosen: list[int]) -> str:
    (group,) = chosen
    return f.group_projects()[group]


def test_the_project_with_utility_at_stake_is_freed_first() -> None:
    """With one group to free, it is ``a1``'s: 160 + 80,000 beats ``b1``'s 800."""
    f = two_projects()
    lp, incumbent = lp_and_incumbent(f)
    _, chosen = planner_mip._next_neighbourhood(f, lp, incumbent, 1, {}, 1)
    assert freed_project(f, chosen) == "a"


def test_without_the_stake_the_larger_start_difference_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counting only the starts' own objective, ``b1``'s 800 beats ``a1``'s 160."""
    monkeypatch.setattr(planner_mip, "STAKE_SHARE", 0.0)
    f = two_projects()
    lp, incumbent = lp_and_incumbent(f)
    _, chosen = planner_mip._next_neighbourhood(f, lp, incumbent, 1, {}, 1)
    assert freed_project(f, chosen) == "b"


def test_a_pool_neighbourhood_frees_one_pools_decisions_only() -> None:
    """Pools ``c`` and ``d``; ``a``'s job may run on either. LP and incumbent differ on
    both pools (0.5 of ``a1`` on each in the LP, nothing in the incumbent); a pool
    neighbourhood frees the starts of one pool and keeps the other's fixed."""
    snapshot = (
        SnapBuilder()
        .pool("c", nodes=2)
        .pool("d", nodes=2)
        .project("a", owed=8)
        .queued("a1", "a")
        .build()
    )
    f = apply(build_epoch(snapshot))
    lp = np.zeros(f.model.num_vars)
    lp[f.x[(0, 0, 0)]] = 0.5
    lp[f.x[(0, 1, 0)]] = 0.5
    incumbent = np.zeros(f.model.num_vars, dtype=np.int64)
    whole, _ = planner_mip._next_neighbourhood(f, lp, incumbent, 100, {}, 1)
    one, _ = planner_mip._next_neighbourhood(f, lp, incumbent, 100, {}, 1, by_pool=True)

    def free_pools(sub: LinearModel) -> set[int]:
        return {p for (_, p, _), v in f.x.items() if sub.lower[v] < sub.upper[v]}

    assert free_pools(whole) == {0, 1}
    assert len(free_pools(one)) == 1


def room_for_a() -> tuple[Formulation, np.ndarray, np.ndarray]:
    """Pools ``c`` and ``d``, 2 nodes of 8 GPUs each. ``a`` (owed 16) waits with one
    16-GPU gang that may run on either; ``b`` runs ``b1``, ``b2`` on ``c``'s nodes and
    ``b3`` on one of ``d``'s, all past their contracts, and waits with ``b4`` (8 GPUs).
    Incumbent: ``b``'s three jobs run all epoch, ``a`` gets nothing. LP: half of ``a``'s
    gang on ``c`` from slice 0 and 100 quanta in ``a``'s first utility segment."""
    snapshot = (
        SnapBuilder()
        .pool("c", nodes=2)
        .pool("d", nodes=2)
        .project("a", owed=16)
        .project("b", owed=8)
        .queued("a1", "a", gpus=16)
        .queued("b4", "b")
        .running("b1", ("c-h100-000",), "b", ran=7200.0)
        .running("b2", ("c-h100-001",), "b", ran=7200.0)
        .running("b3", ("d-h100-000",), "b", ran=7200.0)
        .build()
    )
    f = apply(build_epoch(snapshot))
    c_pool = next(p.index for p in f.epoch.pools if p.cluster == "c")
    a = next(c.index for c in f.epoch.classes if c.project == "a")
    lp = np.zeros(f.model.num_vars)
    incumbent = np.zeros(f.model.num_vars, dtype=np.int64)
    for var in f.z.values():
        lp[var] = incumbent[var] = 1
    lp[f.x[(a, c_pool, 0)]] = 0.5
    lp[f.u[("a", 0)]] = 100.0
    return f, lp, incumbent


def test_a_focus_neighbourhood_frees_the_short_project_and_its_pools_runs() -> None:
    """The focus is ``a`` (800 per quantum at stake, ``b`` none) on pool ``c``: ``a1``'s
    starts are free on both pools over their whole range, ``b1``'s and ``b2``'s slices
    may stop to make room, ``b3`` (pool ``d``) and ``b4`` (started nowhere, in neither
    LP nor incumbent) stay fixed."""
    f, lp, incumbent = room_for_a()
    found = planner_mip._focus_neighbourhood(f, lp, incumbent, {})
    assert found is not None
    sub, project, pool, _ = found
    assert (project, f.epoch.pools[pool].cluster) == ("a", "c")

    def free(var: int) -> bool:
        return sub.lower[var] < sub.upper[var]

    a_vars = [v for (c, _, _), v in f.x.items() if f.epoch.classes[c].project == "a"]
    assert {f.epoch.pools[p].cluster for (c, p, _) in f.x if f.epoch.classes[c].project == "a"} == {"c", "d"}
    assert all(free(v) and sub.lower[v] == 0 and sub.upper[v] == f.model.upper[v] for v in a_vars)
    by_job = {f.epoch.running[j].id: [v for (jj, _), v in f.z.items() if jj == j] for j in range(len(f.epoch.running))}
    assert all(free(v) for v in by_job["b1"] + by_job["b2"])
    assert not any(free(v) for v in by_job["b3"])
    b4_vars = [v for (c, _, _), v in f.x.items() if f.epoch.classes[c].project == "b"]
    assert b4_vars and not any(free(v) for v in b4_vars)


def test_no_focus_when_no_project_is_short() -> None:
    """With the incumbent's utility equal to the LP's, no project is short: no focus."""
    f, lp, incumbent = room_for_a()
    lp[f.u[("a", 0)]] = 0.0
    assert planner_mip._focus_neighbourhood(f, lp, incumbent, {}) is None


def test_group_scores_by_hand() -> None:
    """Groups [0, 1], [2], [] and [3]: the first differs (diff 0.5 on a coefficient of 10),
    the second by only 1e-7, the last not at all; project stakes 100, 40, 7 and 20.
    Scores: 0.5*10 + 0.001*10 + 100 = 105.01; 1e-7*4 + 0.004 + 40/4; 0 (empty); 0.002 + 20/4."""
    diff = np.array([0.5, 0.0, 1e-7, 0.0])
    coef = np.array([10.0, 3.0, 4.0, 2.0])
    flat = np.array([0, 1, 2, 3])
    counts = np.array([2, 1, 0, 1])
    stake = np.array([100.0, 40.0, 7.0, 20.0])
    scores = planner_mip._group_scores(flat, counts, diff, coef, stake)
    assert scores.tolist() == pytest.approx([105.01, 1e-7 * 4 + 0.004 + 10.0, 0.0, 0.002 + 5.0], rel=1e-12)
    assert scores[2] == 0.0


def test_an_earlier_answer_is_placed_only_near_the_best_placed_plan() -> None:
    """Bound 1,000,000, best placed 900,000: the slack is 0.1% of the bound, 1,000; an
    answer the model values at 899,000 is placed, one at 898,999 is not; with no
    placed plan yet, any is."""
    assert planner_mip.EARLIER_SLACK == 0.001
    assert planner_mip._worth_placing(899_000.0, 900_000.0, 1_000_000.0)
    assert not planner_mip._worth_placing(898_999.0, 900_000.0, 1_000_000.0)
    assert planner_mip._worth_placing(0.0, None, 1_000_000.0)


def test_near_the_target_a_search_stops_only_near_its_own_optimum() -> None:
    """rel_gap 1%: a plan 1.04% from the bound lacks 0.04 points, so a search stops
    within 0.02% of its own bound (half of that), not an eighth of rel_gap (0.125%);
    far from the target the eighth holds; a plan already within it asks the floor."""
    assert planner_mip.SEARCH_GAP_SHARE == 0.125 and planner_mip.NEED_SHARE == 0.5
    assert planner_mip._search_gap(0.0104, 0.01) == pytest.approx(0.0002)
    assert planner_mip._search_gap(0.014, 0.01) == pytest.approx(0.00125)
    assert planner_mip._search_gap(float("inf"), 0.01) == pytest.approx(0.00125)
    assert planner_mip._search_gap(0.0099, 0.01) == planner_mip.SEARCH_GAP_FLOOR


def test_every_other_pair_is_guided_by_the_lagrangian_point() -> None:
    """Rounds 2, 3, 6 and 7 (of 0-7: every other pair) measure a focus search against
    the Lagrangian point, rounds 2 and 6 any other search and, where most jobs may use
    at most two pools, a focus search too; the others, and every round when no project
    was solved, against the LP optimum."""
    lp = np.array([0.5, 0.5])
    point = np.array([1.0, 0.0])
    solved = Lagrangian(bound=1.0, parts=2, branched=2, closed=1, seconds=0.0, values=point)
    guided = [r for r in range(8) if planner_mip._guide(lp, solved, r, focus=True) is point]
    assert guided == [2, 3, 6, 7]
    assert [r for r in range(8) if planner_mip._guide(lp, solved, r) is point] == [2, 6]
    assert [r for r in range(8) if planner_mip._guide(lp, solved, r, focus=True, restricted=True) is point] == [2, 6]
    none_solved = Lagrangian(bound=1.0, parts=2, branched=2, closed=0, seconds=0.0, values=point)
    assert all(planner_mip._guide(lp, none_solved, r, focus=True) is lp for r in range(8))
    assert all(planner_mip._guide(lp, None, r, focus=True) is lp for r in range(8))


def pick(
    f: Formulation, lp: np.ndarray, incumbent: np.ndarray, lag: Lagrangian, round_: int, restricted: bool = False
) -> str:
    """What :func:`planner.mip._pick_neighbourhood` calls search ``round_``."""
    best = planner_mip._Best(values=incumbent, objective=f.model.value(incumbent))
    bound = best.objective + 100_000.0
    return planner_mip._pick_neighbourhood(f, lp, lag, best, bound, {}, {}, 0, round_, restricted).kind


def test_a_focus_search_in_a_guided_pair_makes_room_by_the_lagrangian_point() -> None:
    """The LP leaves ``a`` short (80,000 at stake, past the focus share of a gap of
    100,000), the Lagrangian point leaves no one short (the incumbent itself). Round 1
    makes room for ``a``; round 3, the second of a guided pair, finds no project short
    of its point, so it is a disagreement search against the LP instead."""
    f, lp, incumbent = room_for_a()
    lag = Lagrangian(bound=0.0, parts=1, branched=1, closed=1, seconds=0.0, values=incumbent.astype(float))
    assert pick(f, lp, incumbent, lag, 1).startswith("room for a in sub-pool")
    assert "where LP and incumbent disagree" in pick(f, lp, incumbent, lag, 3)


def test_a_focus_search_by_the_lagrangian_point_says_so() -> None:
    """With the Lagrangian point leaving ``a`` as short as the LP does, round 3 makes room
    for ``a`` too, and its entry names the point it measured against; round 1's does not."""
    f, lp, incumbent = room_for_a()
    lag = Lagrangian(bound=0.0, parts=1, branched=1, closed=1, seconds=0.0, values=lp.copy())
    assert "(short of the Lagrangian point)" in pick(f, lp, incumbent, lag, 3)
    assert "Lagrangian" not in pick(f, lp, incumbent, lag, 1)


def test_where_most_jobs_may_use_two_pools_the_focus_keeps_to_the_lp() -> None:
    """The same as two tests above, on an epoch where most jobs may use at most two
    pools: round 3 still makes room for ``a``, short of the LP, as before the
    Lagrangian point guided focus searches."""
    f, lp, incumbent = room_for_a()
    lag = Lagrangian(bound=0.0, parts=1, branched=1, closed=1, seconds=0.0, values=incumbent.astype(float))
    kind = pick(f, lp, incumbent, lag, 3, restricted=True)
    assert kind.startswith("room for a in sub-pool") and "Lagrangian" not in kind
