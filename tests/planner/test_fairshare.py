"""Hierarchical water-filling, demand, the org in force over time, and standings."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models import (
    JobState,
    NodeState,
    OrgUnit,
    Policy,
    Scenario,
    Snapshot,
    project_paths,
    walk,
    with_shares,
)
from planner.budgets import revise
from planner.cli import main
from planner.fairshare import (
    MAX_RATIO,
    demand_at,
    fair_share_ratio,
    job_rate,
    org_at,
    org_history,
    owed_at,
    standings,
    standings_at,
    water_fill,
    window_ratios,
)
from planner.ledger import Ledger, Usage
from scenarios import load_scenario
from scenarios.load import scenario_from_dict

HOUR = 3600.0


def unit(name: str, share: float, *children: OrgUnit) -> OrgUnit:
    return OrgUnit(name=name, share=share, children=children)


# research (3) -> nlp (2), vision (1); infra (1): the tree of the bundled `tiny` scenario.
TINY_ORG = (unit("research", 3, unit("nlp", 2), unit("vision", 1)), unit("infra", 1))


@pytest.fixture(scope="module")
def tiny() -> Scenario:
    return load_scenario("tiny")


# -- water_fill: hand-checked cases ----------------------------------------------------


def test_children_split_by_share_when_all_want_more() -> None:
    """With every project wanting more than capacity, owed follows the effective shares."""
    owed = water_fill(TINY_ORG, {"research/nlp": 100, "research/vision": 100, "infra": 100}, 64)
    assert owed == pytest.approx({"research/nlp": 32, "research/vision": 16, "infra": 16})


def test_child_below_its_slice_passes_excess_to_siblings() -> None:
    """A project wanting less than its slice gets its demand; its sibling gets the rest."""
    owed = water_fill(TINY_ORG, {"research/nlp": 100, "research/vision": 4, "infra": 100}, 64)
    assert owed == pytest.approx({"research/nlp": 44, "research/vision": 4, "infra": 16})


def test_excess_of_a_whole_unit_goes_up_the_tree() -> None:
    """A program wanting less than its slice passes the excess to the other programs."""
    owed = water_fill(TINY_ORG, {"research/nlp": 10, "infra": 100}, 64)
    assert owed == pytest.approx({"research/nlp": 10, "research/vision": 0, "infra": 54})


def test_siblings_first_then_up() -> None:
    """Excess inside a program stays in the program before it goes to other programs."""
    org = (unit("a", 1, unit("x", 1), unit("y", 1)), unit("b", 1))
    owed = water_fill(org, {"a/x": 5, "a/y": 100, "b": 100}, 100)
    # a's slice 50: x takes 5, y gets the other 45; b keeps its own 50.
    assert owed == pytest.approx({"a/x": 5, "a/y": 45, "b": 50})


def test_every_project_listed_and_missing_demand_is_zero() -> None:
    """Every project appears in the result, in tree order; projects without demand get 0."""
    owed = water_fill(TINY_ORG, {"infra": 3}, 64)
    assert list(owed) == ["research/nlp", "research/vision", "infra"]
    assert owed == {"research/nlp": 0.0, "research/vision": 0.0, "infra": 3.0}


def test_zero_capacity_owes_nothing() -> None:
    """With no capacity nobody is owed anything."""
    assert set(water_fill(TINY_ORG, {"infra": 3}, 0.0).values()) == {0.0}


@pytest.mark.parametrize(
    ("demand", "capacity", "message"),
    [
        ({"nope": 1.0}, 10.0, "'nope': not a project"),
        ({"research": 1.0}, 10.0, "'research': not a project"),
        ({"infra": -1.0}, 10.0, "demand of 'infra'"),
        ({"infra": math.nan}, 10.0, "demand of 'infra'"),
        ({"infra": 1.0}, -1.0, "capacity"),
        ({"infra": 1.0}, math.nan, "capacity"),
    ],
)
def test_bad_input_is_one_clear_error(demand: dict[str, float], capacity: float, message: str) -> None:
    """Unknown or non-project paths, negative/NaN demand and bad capacity raise ValueError."""
    with pytest.raises(ValueError, match=message):
        water_fill(TINY_ORG, demand, capacity)


# -- water_fill: properties --------------------------------------------------------------

SHARES = st.floats(min_value=0.1, max_value=10.0, allow_nan=False)
DEMANDS = st.one_of(st.just(0.0), st.floats(min_value=0.0, max_value=100.0, allow_nan=False))


@st.composite
def orgs(draw: st.DrawFn, max_depth: int = 3) -> tuple[OrgUnit, ...]:
    def level(depth: int) -> tuple[OrgUnit, ...]:
        units = []
        for i in range(draw(st.integers(min_value=1, max_value=4))):
            leaf = depth >= max_depth or draw(st.booleans())
            units.append(OrgUnit(name=f"u{depth}{i}", share=draw(SHARES), children=() if leaf else level(depth + 1)))
        return tuple(units)

    return level(0)


@st.composite
def problems(draw: st.DrawFn) -> tuple[tuple[OrgUnit, ...], dict[str, float], float]:
    org = draw(orgs())
    projects = project_paths(org)
    values = draw(st.lists(DEMANDS, min_size=len(projects), max_size=len(projects)))
    capacity = draw(st.floats(min_value=0.0, max_value=500.0, allow_nan=False))
    return org, dict(zip(projects, values, strict=True)), capacity


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-7 * (1.0 + abs(a) + abs(b))


@settings(derandomize=True, max_examples=150, deadline=None)
@given(problems())
def test_owed_sums_to_min_of_capacity_and_demand(problem: tuple[tuple[OrgUnit, ...], dict[str, float], float]) -> None:
    """The owed amounts sum to min(capacity, total demand)."""
    org, demand, capacity = problem
    owed = water_fill(org, demand, capacity)
    assert _close(sum(owed.values()), min(capacity, sum(demand.values())))


@settings(derandomize=True, max_examples=150, deadline=None)
@given(problems())
def test_no_project_owed_more_than_its_demand(problem: tuple[tuple[OrgUnit, ...], dict[str, float], float]) -> None:
    """No project is owed more than its demand, nor less than nothing."""
    org, demand, capacity = problem
    for project, amount in water_fill(org, demand, capacity).items():
        assert -1e-12 <= amount <= demand[project] * (1 + 1e-12) + 1e-12


@settings(derandomize=True, max_examples=150, deadline=None)
@given(problems(), st.data(), st.floats(min_value=1.0, max_value=20.0))
def test_owed_is_monotone_in_own_share(
    problem: tuple[tuple[OrgUnit, ...], dict[str, float], float], data: st.DataObject, factor: float
) -> None:
    """Raising a project's own share never lowers what it is owed."""
    org, demand, capacity = problem
    project = data.draw(st.sampled_from(sorted(demand)))
    share = dict(walk(org))[project].share
    before = water_fill(org, demand, capacity)[project]
    after = water_fill(with_shares(org, {project: share * factor}), demand, capacity)[project]
    assert after >= before - 1e-9 * (1.0 + before)


@settings(derandomize=True, max_examples=150, deadline=None)
@given(problems(), st.data())
def test_program_total_independent_of_internal_split(
    problem: tuple[tuple[OrgUnit, ...], dict[str, float], float], data: st.DataObject
) -> None:
    """Re-splitting shares inside one top-level unit changes no top-level unit's total."""
    org, demand, capacity = problem
    program = data.draw(st.sampled_from(org))
    inner = [path for path, _ in walk(program.children, program.name + "/")]
    new_shares = {path: data.draw(SHARES) for path in inner}
    before = water_fill(org, demand, capacity)
    after = water_fill(with_shares(org, new_shares), demand, capacity)
    for top in org:
        total_before = sum(v for p, v in before.items() if p == top.name or p.startswith(top.name + "/"))
        total_after = sum(v for p, v in after.items() if p == top.name or p.startswith(top.name + "/"))
        assert _close(total_before, total_after)


def _weighted_max_min_reference(weights: list[float], demand: list[float], capacity: float) -> list[float]:
    """Progressive filling by bisection on the water level: min(d_i, level * w_i)."""
    if capacity >= sum(demand):
        return list(demand)
    lo, hi = 0.0, max(d / w for d, w in zip(demand, weights, strict=True))
    for _ in range(200):
        mid = (lo + hi) / 2
        if sum(min(d, mid * w) for d, w in zip(demand, weights, strict=True)) < capacity:
            lo = mid
        else:
            hi = mid
    return [min(d, hi * w) for d, w in zip(demand, weights, strict=True)]


@settings(derandomize=True, max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(SHARES, DEMANDS), min_size=1, max_size=12),
    st.floats(min_value=0.0, max_value=600.0, allow_nan=False),
)
def test_one_level_tree_is_weighted_max_min(pairs: list[tuple[float, float]], capacity: float) -> None:
    """On a one-level tree water-filling equals weighted max-min fairness (bisection reference)."""
    org = tuple(OrgUnit(name=f"p{i}", share=w) for i, (w, _) in enumerate(pairs))
    owed = water_fill(org, {f"p{i}": d for i, (_, d) in enumerate(pairs)}, capacity)
    expected = _weighted_max_min_reference([w for w, _ in pairs], [d for _, d in pairs], capacity)
    for i, value in enumerate(expected):
        assert abs(owed[f"p{i}"] - value) <= 1e-6 * (1.0 + value)


# -- job rates and demand -----------------------------------------------------------------


def test_job_rate_is_cheapest_allowed_type(tiny: Scenario) -> None:
    """A job counts at its cheapest allowed GPU type's rate; B200-only jobs at 2.0."""
    jobs = {j.id: j for j in tiny.jobs}
    assert job_rate(tiny, jobs["j1"]) == 1.0
    assert job_rate(tiny, jobs["j5"]) == 2.0  # gpu_types: [B200]
    assert job_rate(tiny, jobs["j9"]) == 1.0  # clusters: [alpha]


def test_job_rate_skips_pools_whose_nodes_cannot_hold_the_gang() -> None:
    """A gang too big for the H100 cluster counts at the rate of the pool that can hold it."""
    s = scenario_from_dict(
        {
            "name": "gang",
            "clusters": [
                {"name": "small", "node_groups": [{"gpu_type": "H100", "nodes": 1}]},
                {"name": "big", "node_groups": [{"gpu_type": "B200", "nodes": 4}]},
            ],
            "org": [{"name": "p", "share": 1}],
            "workloads": {"jobs": [{"id": "g", "project": "p", "gpus": 24, "duration": "1h"}]},
        }
    )
    assert job_rate(s, s.jobs[0]) == 2.0
    # A bare mapping of types knows no node shapes: cheapest type overall.
    assert job_rate(s.gpu_types, s.jobs[0]) == 1.0


def test_job_rate_same_for_snapshot_and_scenario(tiny: Scenario) -> None:
    """A snapshot of the scenario's nodes gives every job the same rate as the scenario."""
    snap = Snapshot(
        now=0.0,
        policy=tiny.policy,
        gpu_types=tiny.gpu_types,
        org=tiny.org,
        nodes=tuple(NodeState(node=n) for n in tiny.nodes),
        jobs=tuple(JobState(job=j, status="queued") for j in tiny.jobs),
        standing={},
    )
    assert [job_rate(snap, j) for j in tiny.jobs] == [job_rate(tiny, j) for j in tiny.jobs]


def test_demand_counts_funded_jobs_until_they_would_finish(tiny: Scenario) -> None:
    """Demand counts funded jobs from submit until submit + duration, free jobs never."""
    assert demand_at(tiny, 0.0) == {"research/nlp": 24.0, "infra": 16.0}  # j6 (free) at 30m not yet
    # j4 (2 GPUs, vision) runs 15m..35m; j3 (8 GPUs, vision) from 10m; j6 is free work.
    assert demand_at(tiny, 34 * 60.0)["research/vision"] == 10.0
    assert demand_at(tiny, 35 * 60.0)["research/vision"] == 8.0
    assert demand_at(tiny, 31 * 60.0)["infra"] == 16.0  # the free j6 adds nothing


def test_owed_at_water_fills_over_demand(tiny: Scenario) -> None:
    """At 2h demand exceeds capacity and owed follows the shares of the tree."""
    # nlp: j1 16 + j9 32 = 48; vision: j3 8 + j8 16 B200 = 40; infra: j5 8 B200 = 16.
    assert demand_at(tiny, 2 * HOUR) == {"research/nlp": 48.0, "research/vision": 40.0, "infra": 16.0}
    assert owed_at(tiny, 2 * HOUR) == pytest.approx({"research/nlp": 32, "research/vision": 16, "infra": 16})


def test_scenario_show_prints_owed_at_start(capsys: pytest.CaptureFixture[str]) -> None:
    """`gpuplan scenario show tiny` shows nlp owed 24 H100-eq (37.5%) and vision nothing at start."""
    assert main(["scenario", "show", "tiny"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert "24.0 (37.5%)" in rows["nlp"]
    assert "0.0 (0.0%)" in rows["vision"]
    assert "16.0 (25.0%)" in rows["infra"]
    assert "24.0 (37.5%)" in rows["research/"]


# -- the org in force ---------------------------------------------------------------------


def test_revision_applies_from_its_time(tiny: Scenario) -> None:
    """A budget revision changes the org (and owed) from its `at` on, not before."""
    revised = revise(tiny, {"research/vision": 6}, at=HOUR)
    assert org_at(revised, HOUR - 1) == tiny.org
    assert dict(walk(org_at(revised, HOUR)))["research/vision"].share == 6
    # research's 48 now splits 2:6 between nlp and vision.
    assert owed_at(revised, 2 * HOUR) == pytest.approx({"research/nlp": 12, "research/vision": 36, "infra": 16})
    assert owed_at(tiny, 2 * HOUR)["research/nlp"] == pytest.approx(32)  # original untouched


def test_revisions_accumulate_and_history_is_kept(tiny: Scenario) -> None:
    """Each revision keeps earlier changes it does not name; the history lists every period."""
    s = revise(revise(tiny, {"infra": 5}, at=2 * HOUR), {"research/nlp": 7}, at=HOUR)
    history = org_history(s)
    assert [start for start, _ in history] == [0.0, HOUR, 2 * HOUR]
    shares = {p: u.share for p, u in walk(history[-1][1])}
    assert shares["infra"] == 5 and shares["research/nlp"] == 7
    assert {p: u.share for p, u in walk(history[1][1])}["infra"] == 1


def test_revision_at_the_start_replaces_the_initial_org(tiny: Scenario) -> None:
    """A revision effective at time 0 is the org from the start: no empty period."""
    s = revise(tiny, {"infra": 3}, at=0.0)
    assert [start for start, _ in org_history(s)] == [0.0]
    assert dict(walk(org_at(s, 0.0)))["infra"].share == 3


def test_revise_rejects_unknown_unit(tiny: Scenario) -> None:
    """A what-if revision naming an unknown org unit is an error naming it."""
    with pytest.raises(ValueError, match="'research/robots'"):
        revise(tiny, {"research/robots": 2})


# -- standings ----------------------------------------------------------------------------

POLICY = Policy(lookback="7d", epoch="1h")
NOW = 10 * 86400.0


def test_window_ratios_are_the_standings_ratios() -> None:
    """The ratios alone (what the greedy policies read) equal the standings' ratios;
    a project with no record in the window is left out, as ratio 0."""
    with Ledger() as ledger:
        ledger.record([
            Usage("research/nlp", NOW - HOUR, NOW, allocated_gpu_h=30, owed_gpu_h=40),
            Usage("infra", NOW - HOUR, NOW, allocated_gpu_h=20, owed_gpu_h=0),
        ])
        full = standings(TINY_ORG, {"research/nlp": 10}, 64, ledger, NOW, POLICY)
        ratios = window_ratios(ledger, NOW, POLICY)
    assert ratios == {"research/nlp": 0.75, "infra": 1000.0}
    assert {p: ratios.get(p, 0.0) for p in full} == {p: s.ratio for p, s in full.items()}


def test_standings_without_history() -> None:
    """With no ledger every project has ratio 0, no deficit, and a full window of headroom."""
    st_ = standings(TINY_ORG, {"research/nlp": 100}, 64, None, NOW, POLICY)
    assert st_["research/nlp"].owed_gpus == pytest.approx(64)
    assert {s.ratio for s in st_.values()} == {0.0}
    assert st_["infra"].headroom_gpu_h == pytest.approx(16 * 7 * 24)


def test_ratio_and_deficit_come_from_the_lookback_window() -> None:
    """Ratio is charged/owed over [now - lookback, now); deficit is owed minus charged."""
    with Ledger() as ledger:
        ledger.record(
            [
                Usage("research/nlp", NOW - 2 * HOUR, NOW - HOUR, allocated_gpu_h=30, owed_gpu_h=40),
                Usage("research/nlp", NOW - HOUR, NOW, allocated_gpu_h=10, owed_gpu_h=40),
                # Entirely before the window: ignored.
                Usage("research/nlp", NOW - 8 * 86400.0, NOW - 7.5 * 86400.0, allocated_gpu_h=500, owed_gpu_h=1),
                Usage("infra", NOW - HOUR, NOW, allocated_gpu_h=20, owed_gpu_h=10),
            ]
        )
        st_ = standings(TINY_ORG, {"research/nlp": 10}, 64, ledger, NOW, POLICY)
    assert st_["research/nlp"].ratio == pytest.approx(0.5)
    assert st_["research/nlp"].deficit_gpu_h == pytest.approx(40)
    assert st_["infra"].ratio == pytest.approx(2.0)
    assert st_["infra"].deficit_gpu_h == 0.0


def test_record_straddling_the_window_edge_counts_pro_rata() -> None:
    """A record half inside the lookback window counts half."""
    start = NOW - POLICY.lookback - HOUR / 2
    with Ledger() as ledger:
        ledger.record([Usage("infra", start, start + HOUR, allocated_gpu_h=8, owed_gpu_h=4)])
        st_ = standings(TINY_ORG, {}, 64, ledger, NOW, POLICY)
    assert st_["infra"].deficit_gpu_h == 0.0
    assert st_["infra"].ratio == pytest.approx(2.0)
    assert ledger.path == ":memory:"


def test_ratio_when_owed_nothing() -> None:
    """Owed nothing: ratio 0 when also charged nothing, else capped at MAX_RATIO."""
    assert fair_share_ratio(0.0, 0.0) == 0.0
    assert fair_share_ratio(5.0, 0.0) == MAX_RATIO
    assert fair_share_ratio(5.0e9, 1.0) == MAX_RATIO
    assert fair_share_ratio(3.0, 4.0) == 0.75


def test_standings_at_uses_scenario_org_demand_and_capacity(tiny: Scenario) -> None:
    """standings_at(scenario, t) equals standings() of the org in force, demand and capacity at t."""
    revised = revise(tiny, {"infra": 3}, at=HOUR)
    got = standings_at(revised, 2 * HOUR)
    want = standings(org_at(revised, 2 * HOUR), demand_at(revised, 2 * HOUR), 64.0, None, 2 * HOUR, tiny.policy)
    assert got == want
    assert got["infra"].headroom_gpu_h == pytest.approx(32 * 7 * 24)  # infra's effective share is now 1/2
