"""The scheduler core's placement helpers and its count of preemptible GPUs."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from models import (
    Cluster,
    GenerateSpec,
    Job,
    Maintenance,
    NodeGroup,
    OrgUnit,
    PendingReason,
    Policy,
    Pool,
    Scenario,
    SchedulerCounters,
    Workloads,
)
from planner.scheduler import FINISH, SUBMIT, Event, Scheduler, make_policy, try_place
from planner.scheduler.status import live_status
from planner.simulator.engine import Engine

#: The ``on_a_grid`` fixture (``conftest.py``): work on a 5-minute grid.
OnAGrid = Callable[[Scenario, GenerateSpec], Scenario]


def _scheduler(jobs: list[Job], policy: str = "legacy", **kw: Any) -> Scheduler:
    scenario = Scenario(
        name="core",
        clusters=(Cluster(name="alpha", node_groups=(NodeGroup(gpu_type="H100", nodes=1),)),),
        org=(OrgUnit(name="a", share=1), OrgUnit(name="b", share=1)),
        workloads=Workloads(jobs=tuple(jobs)),
    )
    return Scheduler(scenario, make_policy(policy), **kw)


def _contracts_end_as_one_job_finishes(policy: str) -> Scheduler:
    """Two 4-GPU jobs of project a share the node from t = 0, each with a 30 min
    contract; at t = 1800 s one finishes, at the instant both contracts end."""
    jobs = [
        Job(id="short", project="a", gpus=4, duration=1800.0, min_runtime=1800.0),
        Job(id="long", project="a", gpus=4, duration=36000.0, min_runtime=1800.0, resumable=True),
        Job(id="needy", project="b", gpus=8, duration=3600.0, submit=2000.0, min_runtime=1800.0),
    ]
    e = _scheduler(jobs, policy)
    e.step(0.0, [Event(SUBMIT, "short"), Event(SUBMIT, "long")])
    assert e.by_id["short"].status == e.by_id["long"].status == "running"
    e.step(1800.0, [Event(FINISH, "short")])
    return e


def test_a_job_that_finishes_as_its_contract_ends_leaves_the_others_preemptible() -> None:
    """Finishes are handled before contract ends at one instant: the finished job was
    never counted as preemptible, so its stop must not take its GPUs off the count."""
    e = _contracts_end_as_one_job_finishes("legacy")
    assert e.by_id["short"].status == "done"
    assert e.preemptible_gpus == 4  # the long job's, past its contract


def test_fairshare_preempts_work_whose_contract_ended_with_a_finish() -> None:
    """Under fairshare, project b (below its share) takes the node from a's long job,
    whose contract ended at the instant a's other job finished."""
    e = _contracts_end_as_one_job_finishes("fairshare")
    e.step(2000.0, [Event(SUBMIT, "needy")])
    assert e.by_id["needy"].status == "running"
    assert e.by_id["long"].status == "queued"


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


def test_try_place_keeps_its_no_hole_answer_across_a_start_elsewhere() -> None:
    """A start only takes GPUs, so the no-hole answer for a shape still holds after one
    (the memo stays current) and is given again; GPUs given back end it."""
    jobs = [
        Job(id="half", project="a", gpus=4, duration=3600.0),
        Job(id="eight", project="b", gpus=8),
        Job(id="two", project="a", gpus=2, duration=3600.0),
    ]
    e = _scheduler(jobs)
    e.step(0.0, [Event(SUBMIT, "half")])
    cl = e.cluster
    eight = e.by_id["eight"]
    eight.status = "queued"
    assert try_place(e, eight) is None
    e.step(1.0, [Event(SUBMIT, "two")])
    assert e.by_id["two"].status == "running"  # a start: the version moved, no GPU came back
    assert cl.no_hole[(None, None)] == (cl.grown, 8)
    assert try_place(e, eight) is None
    e.preempt(e.by_id["half"], "test")
    e.preempt(e.by_id["two"], "test")
    assert try_place(e, eight) is not None


def test_try_place_on_mixed_node_sizes_asks_again_for_a_bigger_gang() -> None:
    """On a pool of two node sizes, no hole for 8 GPUs does not mean none for 12: a gang
    of 12 takes three whole 4-GPU nodes while the 8-GPU node is half busy."""
    scenario = Scenario(
        name="mixed",
        clusters=(Cluster(name="alpha", node_groups=(
            NodeGroup(gpu_type="H100", nodes=3, gpus_per_node=4),
            NodeGroup(gpu_type="H100", nodes=1, gpus_per_node=8),
        )),),
        org=(OrgUnit(name="a", share=1),),
        workloads=Workloads(jobs=(
            Job(id="eight", project="a", gpus=8), Job(id="twelve", project="a", gpus=12),
        )),
    )
    e = Scheduler(scenario, make_policy("legacy"))
    big = next(n for n, info in e.cluster.nodes.items() if info.size == 8)
    e.cluster.take((big,), 4, 0)
    assert try_place(e, e.by_id["eight"]) is None
    placed = try_place(e, e.by_id["twelve"])
    assert placed is not None and len(placed[1]) == 3


def test_a_fenced_search_leaves_the_hole_to_a_shorter_contract() -> None:
    """The only node's window opens at 1 h: a 2 h contract finds no hole, and that no
    is not remembered for the same shape with a 30 min contract, which fits."""
    scenario = Scenario(
        name="fence",
        clusters=(Cluster(name="alpha", node_groups=(NodeGroup(gpu_type="H100", nodes=1),)),),
        org=(OrgUnit(name="a", share=1),),
        maintenance=(Maintenance(cluster="alpha", nodes=1, start=3600.0, duration=3600.0),),
        workloads=Workloads(jobs=(Job(id="j", project="a", gpus=8),)),
    )
    e = Scheduler(scenario, make_policy("fairshare"))
    run = e.by_id["j"]
    assert e.fenced(7200.0) == frozenset(e.cluster.nodes)
    assert try_place(e, run, contract=7200.0) is None
    assert try_place(e, run, contract=1800.0) is not None
    e.step(3600.0)
    assert e.fenced(7200.0) == frozenset()  # open now: drained, not fenced


def test_the_status_says_a_job_waits_for_maintenance_ahead() -> None:
    """Two 2 h contracts, one node of two free: the free node's window opens at 1 h, so
    the status gives the waiting job the maintenance reason, not a missing gang hole."""
    scenario = Scenario(
        name="fence",
        clusters=(Cluster(name="alpha", node_groups=(NodeGroup(gpu_type="H100", nodes=2),)),),
        org=(OrgUnit(name="a", share=1),),
        maintenance=(Maintenance(cluster="alpha", nodes=1, start=3600.0, duration=3600.0),),
        workloads=Workloads(jobs=tuple(
            Job(id=i, project="a", gpus=8, duration=10800.0, min_runtime=7200.0) for i in "AB"
        )),
    )
    e = Scheduler(scenario, make_policy("fairshare"))
    e.step(0.0, [Event(SUBMIT, "A"), Event(SUBMIT, "B")])
    status = live_status(e, wall=0.0, origin=0.0, policy="fairshare", executor="dry-run",
                         counters=SchedulerCounters())
    (waiting,) = status.queue
    assert waiting.reason is PendingReason.MAINTENANCE


def test_a_start_the_cluster_refused_is_taken_back_not_preempted() -> None:
    """unstart: the job is queued again as before its start (no preemption, no restart,
    no first start, nothing charged), its GPUs are free, and the log says so."""
    jobs = [Job(id="j", project="a", gpus=8, duration=3600.0, min_runtime=1800.0)]
    e = _scheduler(jobs, "fairshare")
    e.step(0.0, [Event(SUBMIT, "j")])
    run = e.by_id["j"]
    assert run.status == "running"
    e.now = 60.0
    e.unstart(run, "executor: refused")
    assert (run.status, run.preemptions, run.restarts, run.progress) == ("queued", 0, 0, 0.0)
    assert math.isnan(run.first_start)
    assert e.cluster.total_free == 8 and e.acct.segments == []
    assert [row[1] for row in e.log][-1] == "start_failed"


def test_an_outage_is_owed_only_to_work_submitted_by_then() -> None:
    """A live run restarts at 2 h with its ledger charged to 0: a's job came at 0, b's at
    1 h 20 min. a is owed the one node alone until b's job is there (from the 1 h 30 min
    slice on), then half: 8 x 1.5 + 4 x 0.75 = 15 GPU-h; b 4 x 0.75 = 3 (both 9 when the
    demand at the restart was owed for the whole outage)."""
    jobs = [Job(id="A", project="a", gpus=8, duration=36000.0, min_runtime=1800.0),
            Job(id="B", project="b", gpus=8, duration=36000.0, min_runtime=1800.0, submit=4800.0)]
    scenario = Scenario(
        name="outage",
        clusters=(Cluster(name="alpha", node_groups=(NodeGroup(gpu_type="H100", nodes=1),)),),
        org=(OrgUnit(name="a", share=1), OrgUnit(name="b", share=1)),
        workloads=Workloads(jobs=tuple(jobs)),
    )
    e = Scheduler(scenario, make_policy("fairshare"), start=7200.0, charged_until=0.0)
    e.step(7200.0, [Event(SUBMIT, "A"), Event(SUBMIT, "B")])
    e.step(8100.0)
    owed = {u.project: u.owed_gpu_h for u in e.ledger.records() if u.end == 8100.0}
    assert owed == pytest.approx({"a": 15.0, "b": 3.0})


def _grid_base() -> Scenario:
    return Scenario(
        name="grid",
        clusters=(Cluster(name="alpha", node_groups=(NodeGroup(gpu_type="H100", nodes=4),)),),
        org=(OrgUnit(name="a", share=1), OrgUnit(name="b", share=2), OrgUnit(name="c", share=1)),
        policy=Policy(epoch=3600.0, slices=4),
    )


@pytest.mark.parametrize("policy", ["legacy", "fairshare", "mip"])
def test_the_preemptible_count_is_the_running_gpus_past_their_contracts(
    policy: str, on_a_grid: OnAGrid
) -> None:
    """After every step of a day of work on a 5-minute grid (completions and contract
    ends meet), the count the victim searches are gated on equals the GPUs of running
    jobs whose minimum runtime has passed."""
    options = {"time_limit": 0.5} if policy == "mip" else {}
    spec = GenerateSpec(seed=0, days=1, load=1.3, users=8, backlog=4 * 3600.0)
    engine = Engine(on_a_grid(_grid_base(), spec), make_policy(policy, **options), 86400.0)
    core = engine.core
    step = core.step
    steps = []

    def checked(now: float, events: Any = ()) -> bool:
        moved = step(now, events)
        truth = sum(r.job.gpus for r in core.running.values() if core.past_contract(r))
        steps.append((core.preemptible_gpus, truth))
        return moved

    core.step = checked  # type: ignore[method-assign]
    engine.run()
    assert steps and all(count == truth for count, truth in steps)
    assert any(truth > 0 for _, truth in steps)


def test_the_reported_start_of_free_work_moves_its_run_start() -> None:
    """Free work (no contract) counts from when the cluster says it began, as funded
    work does: ``started_at`` moves its run start, and it stays preemptible once."""
    jobs = [
        Job(id="free", project="a", gpus=4, duration=3600.0, min_runtime=0.0),
        Job(id="later", project="b", gpus=4, duration=3600.0, submit=30.0),
    ]
    e = _scheduler(jobs)
    e.step(0.0, [Event(SUBMIT, "free")])
    run = e.by_id["free"]
    assert run.status == "running" and e.preemptible_gpus == 4
    e.step(30.0, [Event(SUBMIT, "later")])
    e.started_at(run, 20.0)
    assert run.run_start == 20.0
    assert e.preemptible_gpus == 4


def test_an_adopted_run_told_it_ran_free_is_charged_nothing() -> None:
    """Two funded 4-GPU runs found running since 0 on a restart at 600 s: the one adopted
    with ``charged=False`` (started as free work) is unallocated time in the ledger, the
    other allocated, each for the 900 s up to the charge point."""
    jobs = [Job(id="free", project="a", gpus=4, duration=36000.0, resumable=True),
            Job(id="paid", project="b", gpus=4, duration=36000.0, resumable=True)]
    e = _scheduler(jobs, "fairshare", start=600.0, charged_until=0.0)
    node = (e.scenario.nodes[0].name,)
    e.adopt(e.by_id["free"], Pool("alpha", "H100"), node, 0.0, charged=False)
    e.adopt(e.by_id["paid"], Pool("alpha", "H100"), node, 0.0)
    e.step(600.0)
    e.step(900.0)
    used = {u.project: (u.allocated_gpu_h, u.unallocated_gpu_h) for u in e.ledger.records()}
    assert used == {"a": (0.0, pytest.approx(1.0)), "b": (pytest.approx(1.0), 0.0)}
