"""A battery of tiny epochs with hand-computed optimal plans, run on every backend.

Objective arithmetic (docs/formulation.md): work is counted in quanta (a tenth of an
H100-eq GPU-slice), so an 8-GPU H100 job does 80 quanta per slice. A project owed 8 GPUs
has a target of 8 x 4 slices x 10 = 320 quanta. With fair-share ratio 1 (weight 1) its
utility slopes are 800, 400, 100, 25 per quantum on [0, 160], [160, 320], [320, 640] and
beyond; ratio 0 doubles them, ratio 3 halves them. Uncharged work (free jobs, or past
the headroom) earns 200 per quantum (ratio 1) while the project's charged plus uncharged
work stays within its 320-quanta target, nothing beyond. Every quantum of work adds 5
(work conservation); urgent work 5 more.
"""

from __future__ import annotations

import pytest

from models import PendingReason, Plan, Snapshot, SolveStatus
from planner.mip import plan_epoch
from planner.mip.backends import BACKENDS

BACKEND_NAMES = [pytest.param(n, marks=pytest.mark.skipif(not b.is_available(), reason=f"{n} missing")) for n, b in BACKENDS.items()]


def solve(snapshot: Snapshot, backend: str) -> Plan:
    return plan_epoch(snapshot, backend=backend, time_limit=20.0, rel_gap=0.0)


def slices_of(plan: Plan, job: str) -> list[int]:
    return [k for k, s in enumerate(plan.slices) for a in s.assignments if a.job == job]


CASES = {
    # One 8-GPU job, one 8-GPU node: it runs all four slices.
    # utility 160*800 + 160*400 = 192000; work 320*5 = 1600.
    "one_job": (
        lambda s: s().pool().project("a", owed=8).queued("a1").build(),
        193_600,
        {"a1": [0, 1, 2, 3]},
    ),
    # Concave utility spreads GPUs: b1 and one of a's jobs beat a1 + a2.
    # each project 160 quanta = its target: 80*800 + 80*400 = 96000, twice; work 1600.
    "spread": (
        lambda s: s()
        .pool()
        .project("a", owed=4)
        .project("b", owed=4)
        .queued("a1", "a", gpus=4)
        .queued("a2", "a", gpus=4)
        .queued("b1", "b", gpus=4)
        .build(),
        193_600,
        {"a1": [0, 1, 2, 3], "b1": [0, 1, 2, 3], "a2": []},
    ),
    # The project further below its share (ratio 0, weight 2) wins the only node.
    # a: 80*1600 + 80*800 + 160*200 = 224000; work 1600.
    "ratio": (
        lambda s: s()
        .pool()
        .project("a", owed=4, ratio=0.0)
        .project("b", owed=4, ratio=1.0)
        .queued("a1", "a")
        .queued("b1", "b")
        .build(),
        225_600,
        {"a1": [0, 1, 2, 3], "b1": []},
    ),
    # Headroom of 4 GPU-h = 160 quanta: two slices charged, two run unallocated.
    # charged 160 quanta in the first segment: 160*800 = 128000; the 160 uncharged quanta
    # fit under the owed 320 (320 - 160 charged) at the free slope 100*1*2 = 200: 32000;
    # work 1600.
    "budget": (
        lambda s: s().pool().project("a", owed=8, headroom=4.0).queued("a1").build(),
        161_600,
        {"a1": [0, 1, 2, 3]},
    ),
    # A running job past its contract, of a project far above its share (ratio 3,
    # weight 0.5), yields the node to a project at ratio 0 (weight 2): preempted at once.
    # a: 160*1600 + 160*800 = 384000; work 1600; preemption 80*100*(4 + 120/900) = 33067.
    "preempt": (
        lambda s: s()
        .pool()
        .project("a", owed=8, ratio=0.0)
        .project("b", owed=8, ratio=3.0)
        .running("r1", ("c-h100-000",), "b", ran=7200.0, resumable=True)
        .queued("a1", "a")
        .build(),
        352_533,
        {"a1": [0, 1, 2, 3], "r1": []},
    ),
    # Free work inside its owed share beats charged work borrowed past a share: a (owed 8)
    # has only a free job, b (owed 0) a funded one; the node goes to a1.
    # a1: 320 uncharged quanta within a's target at 200: 64000; work 1600.
    # (b1 instead: 320 charged quanta past a zero target at 25 = 8000, + 1600.)
    "free_within_share": (
        lambda s: s()
        .pool()
        .project("a", owed=8)
        .project("b", owed=0)
        .queued("a1", "a", min_runtime=0.0)
        .queued("b1", "b")
        .build(),
        65_600,
        {"a1": [0, 1, 2, 3], "b1": []},
    ),
    # Urgent work goes first inside its project: +5 per quantum, 1600 in all.
    "urgent": (
        lambda s: s()
        .pool()
        .project("a", owed=8)
        .queued("a1", "a")
        .queued("a2", "a", urgent=True)
        .build(),
        195_200,
        {"a2": [0, 1, 2, 3], "a1": []},
    ),
    # Two half-hour jobs share the node in time: one per half of the epoch.
    "time_slices": (
        lambda s: s()
        .pool()
        .project("a", owed=8)
        .queued("a1", "a", duration=1800.0, min_runtime=900.0)
        .queued("a2", "a", duration=1800.0, min_runtime=900.0)
        .build(),
        193_600,
        {"a1": [0, 1], "a2": [2, 3]},
    ),
}


@pytest.mark.parametrize("backend", BACKEND_NAMES)
@pytest.mark.parametrize("case", list(CASES))
def test_conformance(snap: type, backend: str, case: str) -> None:
    """Each backend reaches the hand-computed optimal objective and plan."""
    build, objective, where = CASES[case]
    plan = solve(build(snap), backend)
    assert not plan.solver.fallback
    assert plan.solver.status is SolveStatus.OPTIMAL
    assert plan.solver.objective == pytest.approx(objective)
    for job, expected in where.items():
        assert slices_of(plan, job) == expected, job


def test_backends_agree_on_tiny_scenario() -> None:
    """Both backends reach the same optimal objective on the bundled tiny scenario."""
    from planner.snapshot import snapshot_at
    from scenarios import load_scenario

    scenario = load_scenario("tiny")
    available = [n for n, b in BACKENDS.items() if b.is_available()]
    for t in (0.0, 3600.0, 7200.0):
        snapshot = snapshot_at(scenario, t)
        objectives = {n: solve(snapshot, n).solver.objective for n in available}
        assert len(set(objectives.values())) == 1, (t, objectives)


def test_budget_case_charges_two_slices(snap: type) -> None:
    """With headroom for two slices, exactly the first two slices are charged."""
    plan = solve(CASES["budget"][0](snap), "cpsat")
    charged = [a.charged for s in plan.slices for a in s.assignments]
    assert charged == [True, True, False, False]
    (project,) = plan.projects
    assert project.charged_gpu_h == pytest.approx(4.0)
    assert project.planned_gpu_h == pytest.approx(8.0)


def test_preempt_case_actions(snap: type) -> None:
    """The preempted job gets a preempt action at the epoch start; the new one a start."""
    plan = solve(CASES["preempt"][0](snap), "cpsat")
    actions = {(a.job, a.action, a.at) for a in plan.actions}
    assert actions == {("r1", "preempt", 0.0), ("a1", "start", 0.0)}


def test_time_slices_case_actions(snap: type) -> None:
    """The second half-hour job starts at the third slice's boundary (30 min)."""
    plan = solve(CASES["time_slices"][0](snap), "cpsat")
    assert ("a2", "start", 1800.0) in {(a.job, a.action, a.at) for a in plan.actions}


def test_spread_case_pending_reason(snap: type) -> None:
    """The job left out by the fair-share spread is pending for its fair-share rank."""
    plan = solve(CASES["spread"][0](snap), "cpsat")
    (pending,) = plan.pending
    assert pending.job == "a2"
    assert pending.reason is PendingReason.FAIR_SHARE_RANK
