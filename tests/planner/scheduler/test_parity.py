"""The guard that keeps the two drivers from drifting apart: the simulator and the live
control loop (``gpuplan run``'s, against the dryrun executor on a fake clock) make the
same decisions, at the same times, on the same nodes, from the same scenario."""

from __future__ import annotations

import io
from typing import Any

import pytest

from models import Cluster, Job, NodeGroup, OrgUnit, Policy, Scenario, Workloads
from planner.control import ControlLoop
from planner.executors.dryrun import DryRunExecutor
from planner.ledger import Ledger
from planner.runstate import RunState
from planner.simulator import simulate
from scenarios import load_scenario

ORIGIN = 1_800_000_000.0
DECISIONS = ("start", "resume", "preempt", "hold", "release")
HOURS = 6


class FakeTime:
    """A clock that only moves when the loop sleeps."""

    def __init__(self, t: float) -> None:
        self.t = t

    def time(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


def contended() -> Scenario:
    """``tiny`` with every job submitted twice, so work queues, is preempted and waits."""
    tiny = load_scenario("tiny")
    extra = tuple(j.model_copy(update={"id": f"{j.id}b", "submit": j.submit + 300.0})
                  for j in tiny.jobs)
    return tiny.model_copy(update={"workloads": tiny.workloads.model_copy(
        update={"jobs": (*tiny.jobs, *extra)})})


def gang_waits() -> Scenario:
    """Four nodes kept full of 8-GPU work under 1 h contracts by one project, and a 16-GPU
    gang of another that must wait for two nodes at once: under ``mip`` it gets a hold."""
    jobs = [Job(id=f"a{i}", project="a", gpus=8, duration=3600.0 * (1 + i % 4),
                min_runtime=3600.0, resumable=False) for i in range(12)]
    jobs.append(Job(id="gang", project="b", gpus=16, submit=60.0, duration=7200.0,
                    min_runtime=3600.0, resumable=True))
    return Scenario(
        name="gang-waits",
        clusters=(Cluster(name="alpha", node_groups=(NodeGroup(gpu_type="H100", nodes=4),)),),
        org=(OrgUnit(name="a", share=1), OrgUnit(name="b", share=1)),
        policy=Policy(epoch=3600.0, slices=4),
        workloads=Workloads(jobs=tuple(jobs)),
    )


OPTIONS: dict[str, dict[str, Any]] = {
    "legacy": {},
    "fairshare": {},
    # The solver runs to optimality on this instance, so both sides get the same plans.
    "mip": {"backend": "pulp", "time_limit": 30.0, "rel_gap": 0.0, "hold_min_gpus": 16,
            "hold_fraction": 0.5},
}


def simulated(scenario: Scenario, policy: str) -> list[tuple[Any, ...]]:
    events = simulate(scenario, policy, days=HOURS / 24, **OPTIONS[policy]).events
    rows = events[events.event.isin(DECISIONS)]
    return [(float(r.t), r.event, r.job, r.nodes) for r in rows.itertuples()]


def live(scenario: Scenario, policy: str) -> list[tuple[Any, ...]]:
    clock = FakeTime(ORIGIN)
    executor = DryRunExecutor(scenario, io.StringIO(), clock=clock.time)
    loop = ControlLoop(scenario, executor, Ledger(), policy=policy, policy_options=OPTIONS[policy],
                       run_state=RunState(ORIGIN), poll=60.0, clock=clock.time, sleep=clock.sleep)
    loop.run(epochs=HOURS)
    assert loop.core is not None
    return [(float(r[0]), r[1], r[2], r[5]) for r in loop.core.log if r[1] in DECISIONS]


@pytest.mark.parametrize("policy", ["legacy", "fairshare", "mip"])
def test_simulator_and_live_loop_make_the_same_decisions(policy: str) -> None:
    """Equal start, resume, preempt, hold and release events, with equal times and nodes."""
    scenario = contended()
    sim = simulated(scenario, policy)
    got = live(scenario, policy)
    kinds = {e for _, e, _, _ in sim}
    assert {"start", "preempt"} <= kinds, f"the scenario must exercise preemption: {kinds}"
    assert got == sim


def test_a_held_hole_is_decided_the_same_way_by_both_drivers() -> None:
    """``mip``'s hold for a waiting gang, and the gang's start in it, happen at the same
    time on the same nodes under the simulator and under the live loop."""
    scenario = gang_waits()
    sim = simulated(scenario, "mip")
    assert any(e == "hold" and job == "gang" for _, e, job, _ in sim), sim
    assert live(scenario, "mip") == sim
