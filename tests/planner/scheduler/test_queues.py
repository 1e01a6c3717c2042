"""Shape-bucketed queues and the victim search the greedy policies share."""

from __future__ import annotations

import math
from typing import Any

from models import Cluster, Job, NodeGroup, OrgUnit, Scenario, Workloads
from planner.scheduler import SUBMIT, Event, Scheduler, make_policy
from planner.scheduler.queues import (
    ShapeQueues,
    VictimIndex,
    victim_level,
    victims_may_open,
    within_project,
)
from planner.scheduler.state import JobRun


def _scenario(jobs: list[Job], nodes: int = 2) -> Scenario:
    return Scenario(
        name="queues",
        clusters=(Cluster(name="alpha", node_groups=(NodeGroup(gpu_type="H100", nodes=nodes),)),),
        org=(OrgUnit(name="a", share=1), OrgUnit(name="b", share=1)),
        workloads=Workloads(jobs=tuple(jobs)),
    )


def _scheduler(jobs: list[Job], nodes: int = 2) -> Scheduler:
    return Scheduler(_scenario(jobs, nodes), make_policy("legacy"))


def test_with_work_lists_only_groups_with_queued_jobs_by_rank() -> None:
    """Groups without a queued shape are left out; the rest come in rank order."""
    e = _scheduler([Job(id="a1", project="a", gpus=8), Job(id="b1", project="b", gpus=4)])
    queue = ShapeQueues(within_project)
    queue.push("b", e.by_id["b1"])
    queue.push("a", e.by_id["a1"])
    assert queue.with_work({"a": 1, "b": 0, "c": 2}) == [(0, "b"), (1, "a")]
    assert queue.with_work({"a": 1, "b": 0}, after=0) == [(1, "a")]


def test_with_work_drops_a_group_once_its_jobs_started() -> None:
    """After an iteration starts a group's only job, the group has no work left."""
    e = _scheduler([Job(id="a1", project="a", gpus=8)])
    e.step(0.0, [Event(SUBMIT, "a1")])  # legacy starts it at once
    queue = ShapeQueues(within_project)
    queue.push("a", e.by_id["a1"])  # an entry gone stale: the job runs
    assert list(queue.iter_group(e, "a", set())) == []
    assert queue.with_work({"a": 0}) == []
    assert "a" not in queue.groups


def test_revived_counts_pushes_into_a_group_without_work() -> None:
    """A push into an empty group moves ``revived``; one into a group with work does not."""
    e = _scheduler([Job(id="a1", project="a", gpus=8), Job(id="a2", project="a", gpus=8)])
    queue = ShapeQueues(within_project)
    queue.push("a", e.by_id["a1"])
    queue.push("a", e.by_id["a2"])
    assert queue.revived == 1


def test_victim_search_sees_a_node_whose_job_became_a_victim() -> None:
    """The per-pool list of nodes holding victims is rebuilt when a node's jobs change."""
    jobs = [
        Job(id="free", project="a", gpus=8, duration=7200.0, min_runtime=0.0),
        Job(id="want", project="b", gpus=8, duration=3600.0, min_runtime=600.0, submit=60.0),
    ]
    e = _scheduler(jobs, nodes=1)
    level = {"free": -math.inf}  # not a victim at first

    def level_of(v: JobRun) -> float:
        return level.get(v.job.id, math.inf)

    index = VictimIndex(e, level=level_of, cost=lambda v: 0.0)
    e.step(0.0, [Event(SUBMIT, "free")])
    want = e.by_id["want"]
    assert index.find(want, 0.0) is None
    level["free"] = math.inf
    e.touched.update(e.cluster.nodes)  # what the engine marks when a job's standing changes
    found = index.find(want, 0.0)
    assert found is not None and [v.job.id for v in found[1]] == ["free"]



def test_a_multi_node_search_takes_the_cheapest_nodes_it_may() -> None:
    """A two-node gang's victims are those of the two cheapest whole nodes left once the
    excluded and the spared ones are passed over; with fewer left, there are none."""
    jobs = [Job(id=f"f{k}", project="a", gpus=8, duration=7200.0, min_runtime=0.0) for k in range(4)]
    jobs.append(Job(id="gang", project="b", gpus=16, duration=3600.0, min_runtime=600.0))
    e = _scheduler(jobs, nodes=4)
    e.step(0.0, [Event(SUBMIT, f"f{k}") for k in range(4)])
    cost = {"f0": 4.0, "f1": 1.0, "f2": 2.0, "f3": 3.0}
    index = VictimIndex(e, level=lambda v: math.inf, cost=lambda v: cost[v.job.id])
    gang = e.by_id["gang"]

    def victims(**how: Any) -> list[str] | None:
        found = index.find(gang, 0.0, **how)
        return None if found is None else sorted(v.job.id for v in found[1])

    assert victims() == ["f1", "f2"]
    node_of = {e.runs[i].job.id: n for n, ids in e.cluster.jobs_on.items() for i in ids}
    assert victims(exclude={node_of["f1"]}) == ["f2", "f3"]
    assert victims(spare=lambda v: v.job.id == "f2") == ["f1", "f3"]
    assert victims(exclude={node_of["f1"]}, spare=lambda v: v.job.id in {"f2", "f3"}) is None


def test_shape_numbers_tell_shapes_apart() -> None:
    """Jobs of one shape share a number; another size or GPU type gets another."""
    from planner.scheduler.queues import shape_of

    e = _scheduler([
        Job(id="a", project="a", gpus=8), Job(id="b", project="b", gpus=8),
        Job(id="c", project="a", gpus=16), Job(id="d", project="a", gpus=8, gpu_types=("H100",)),
    ])
    a, b, c, d = (shape_of(e.by_id[i]) for i in "abcd")
    assert a == b
    assert len({a, c, d}) == 3


def test_the_victim_bound_counts_only_what_the_rule_lets_go() -> None:
    """Two 8-GPU nodes hold a free job and a charged resumable job of ``a`` (ratio 0.5).
    For a 16-GPU gang both count once the charged job's contract has passed, and only
    for a requester below 0.5; where the bound says no, the node search finds nothing."""
    jobs = [
        Job(id="free", project="a", gpus=8, duration=7200.0, min_runtime=0.0),
        Job(id="paid", project="a", gpus=8, duration=7200.0, min_runtime=600.0, resumable=True),
        Job(id="gang", project="b", gpus=16, duration=3600.0, min_runtime=600.0),
        Job(id="one", project="b", gpus=8, duration=3600.0, min_runtime=600.0),
    ]
    e = Scheduler(_scenario(jobs), make_policy("fairshare"))
    e.step(0.0, [Event(SUBMIT, "free"), Event(SUBMIT, "paid")])
    assert e.by_id["paid"].charged and not e.by_id["free"].charged
    ratio = {"a": 0.5, "b": 0.0}
    gang, one = e.by_id["gang"].job, e.by_id["one"].job
    assert not victims_may_open(e, ratio, gang, 0.4)  # inside its contract: no victim
    assert victims_may_open(e, ratio, one, 0.4)  # the free job's node
    e.step(700.0)  # the contract ends at 600
    assert victims_may_open(e, ratio, gang, 0.4)
    assert not victims_may_open(e, ratio, gang, 0.6)
    assert victims_may_open(e, ratio, one, 0.6)
    index = VictimIndex(e, level=lambda v: victim_level(e, ratio, v), cost=lambda v: 0.0)
    assert index.find(e.by_id["gang"], 0.6) is None
    found = index.find(e.by_id["gang"], 0.4)
    assert found is not None and sorted(v.job.id for v in found[1]) == ["free", "paid"]
