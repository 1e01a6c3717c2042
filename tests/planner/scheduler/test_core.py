"""The scheduler core's placement helpers."""

from __future__ import annotations

from models import Cluster, Job, NodeGroup, OrgUnit, Scenario, Workloads
from planner.scheduler import SUBMIT, Event, Scheduler, make_policy, try_place


def _scheduler(jobs: list[Job]) -> Scheduler:
    scenario = Scenario(
        name="core",
        clusters=(Cluster(name="alpha", node_groups=(NodeGroup(gpu_type="H100", nodes=1),)),),
        org=(OrgUnit(name="a", share=1), OrgUnit(name="b", share=1)),
        workloads=Workloads(jobs=tuple(jobs)),
    )
    return Scheduler(scenario, make_policy("legacy"))


def test_try_place_finds_the_hole_a_finished_job_leaves() -> None:
    """A shape that found no hole finds one once GPUs are freed (no stale answer)."""
    jobs = [Job(id="big", project="a", gpus=8, duration=3600.0), Job(id="next", project="b", gpus=8)]
    e = _scheduler(jobs)
    e.step(0.0, [Event(SUBMIT, "big")])
    nxt = e.by_id["next"]
    nxt.status = "queued"
    assert try_place(e, nxt) is None
    e.preempt(e.by_id["big"], "test")
    assert try_place(e, nxt) is not None
