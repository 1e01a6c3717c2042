"""The ``mip`` policy's rules between plans: the fast lane, the funded lane, victims."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from models import (
    Assignment,
    Cluster,
    Job,
    Maintenance,
    NodeGroup,
    OrgUnit,
    PendingReason,
    Plan,
    Policy,
    Scenario,
    SchedulerCounters,
    Slice,
    SolverInfo,
    SolveStatus,
    Workloads,
)
from planner.scheduler import SUBMIT, Event, Scheduler
from planner.scheduler.mip import MipPolicy
from planner.scheduler.queues import fair_share_rank
from planner.scheduler.state import JobRun
from planner.scheduler.status import live_status
from planner.simulator import simulate
from planner.simulator.validate import check_result

H = 3600.0
SLICE = 900.0


def build(jobs: list[dict[str, Any]], nodes: int, shares: dict[str, float]) -> Scenario:
    return Scenario(
        name="lanes",
        clusters=(Cluster(name="c", node_groups=(NodeGroup(gpu_type="H100", nodes=nodes),)),),
        org=tuple(OrgUnit(name=p, share=v) for p, v in shares.items()),
        policy=Policy(epoch=H, slices=4, restart_overhead=60.0),
        workloads=Workloads(jobs=tuple(Job(**j) for j in jobs)),
    )


def events(s: Scenario, **options: Any) -> pd.DataFrame:
    r = simulate(s, "mip", days=2 / 24, time_limit=5.0, backend="pulp", **options)
    assert check_result(s, r) == []
    return r.events


def test_the_fast_lane_never_preempts_a_job_twice_within_a_slice() -> None:
    """Free work evicted by one debug job and restarted is not evicted again by the next
    debug job within the same slice: the second one waits."""
    s = build([
        {"id": "U", "project": "a", "gpus": 8, "duration": 4 * H, "min_runtime": 0, "resumable": True},
        {"id": "D1", "project": "b", "gpus": 1, "duration": 120, "min_runtime": 120, "submit": 60},
        {"id": "D2", "project": "b", "gpus": 1, "duration": 120, "min_runtime": 120, "submit": 300},
    ], nodes=1, shares={"a": 1, "b": 1})
    ev = events(s)
    u = ev[(ev.job == "U") & (ev.event == "preempt")]
    assert list(u[u.t < 180.0 + SLICE].t) == [60.0]  # by D1; not again by D2 within a slice
    d2 = ev[(ev.job == "D2") & (ev.event == "start")]
    # U restarted at 180 s and is spared a slice; D2 gets it the moment that ends.
    assert float(d2.t.iloc[0]) == 180.0 + SLICE


class HandPlanned(MipPolicy):
    """``mip`` executing a plan given by hand instead of one from the solver."""

    def __init__(self, plan: Plan, **options: Any) -> None:
        super().__init__(holds=False, **options)
        self.given = plan

    def _plan(self, now: float) -> None:
        e = self.engine
        self.ratio, self.order = fair_share_rank(e.projects, e.standings())
        self.owed = {p: 8.0 for p in e.projects}
        self.plan = self.given
        self.known_running = {r.index for r in e.running.values()}


def _assign(job: str, project: str, node: str, gpus: int, charged: bool) -> Assignment:
    return Assignment(job=job, project=project, cluster="c", gpu_type="H100", nodes=(node,),
                      gpus=gpus, charged=charged)


def test_a_job_evicted_by_the_fast_lane_is_not_put_back_by_the_plan_in_that_slice() -> None:
    """The plan runs free U; a debug job evicts it; the plan's retry of its starts does not
    put U back on the idle node a later planned start needs (where that start would
    evict it again: the churn loop). U waits for the next slice."""
    s = build([
        {"id": "F", "project": "a", "gpus": 8, "duration": 4 * H, "min_runtime": H},
        {"id": "U", "project": "a", "gpus": 4, "duration": 4 * H, "min_runtime": 0, "resumable": True},
        {"id": "G", "project": "a", "gpus": 8, "duration": 4 * H, "min_runtime": H},
        {"id": "D", "project": "b", "gpus": 8, "duration": 1200, "min_runtime": 600, "submit": 60},
    ], nodes=3, shares={"a": 1, "b": 1})
    f, u, g = (_assign("F", "a", "c-h100-000", 8, True), _assign("U", "a", "c-h100-001", 4, False),
               _assign("G", "a", "c-h100-002", 8, True))
    plan = Plan(epoch_start=0, epoch_end=H, solver=SolverInfo(backend="hand", status=SolveStatus.OPTIMAL),
                slices=(Slice(start=0, end=SLICE, assignments=(f, u)),
                        *(Slice(start=k * SLICE, end=(k + 1) * SLICE, assignments=(f, u, g))
                          for k in (1, 2, 3))))
    core = Scheduler(s, HandPlanned(plan))
    core.step(0.0, [Event(SUBMIT, j) for j in ("F", "U", "G")])
    core.step(60.0, [Event(SUBMIT, "D")])
    log = [(t, ev, job, nodes) for t, ev, job, _p, _pool, nodes, *_ in core.log]
    assert (60.0, "preempt", "U", "c-h100-001") in log
    assert (60.0, "start", "D", "c-h100-001") in log
    assert not [row for row in log if row[2] == "U" and row[1] == "resume"]
    assert core.by_id["U"].status == "queued"


class FixedRatios(HandPlanned):
    """A hand plan, with project a far above its share and b below it."""

    def _plan(self, now: float) -> None:
        super()._plan(now)
        self.ratio, self.order = {"a": 2.0, "b": 0.5}, ["b", "a"]


@pytest.mark.parametrize("gang", [False, True])
def test_a_debug_job_that_waited_a_slice_displaces_work_of_any_project_but_no_gang(gang: bool) -> None:
    """Debug job D of project a (ratio 2.0) arrives at 1,000 s; the cluster is full of
    b's resumable job R (ratio 0.5), past its contract since 900 s. A lower ratio than
    D's is no victim at first; after a slice of waiting (at 1,900 s) it is, unless R is
    a multi-node gang (D would idle most of its nodes): then D waits on."""
    nodes = 2 if gang else 1
    s = build([
        {"id": "R", "project": "b", "gpus": 8 * nodes, "duration": 4 * H, "min_runtime": SLICE,
         "resumable": True},
        {"id": "D", "project": "a", "gpus": 1, "duration": 600, "min_runtime": 300, "submit": 1000},
    ], nodes=nodes, shares={"a": 1, "b": 1})
    r = Assignment(job="R", project="b", cluster="c", gpu_type="H100",
                   nodes=tuple(f"c-h100-00{k}" for k in range(nodes)), gpus=8 * nodes, charged=True)
    plan = Plan(epoch_start=0, epoch_end=H, solver=SolverInfo(backend="hand", status=SolveStatus.OPTIMAL),
                slices=tuple(Slice(start=k * SLICE, end=(k + 1) * SLICE, assignments=(r,)) for k in range(4)))
    core = Scheduler(s, FixedRatios(plan))
    core.step(0.0, [Event(SUBMIT, "R")])
    core.step(1000.0, [Event(SUBMIT, "D")])
    assert core.by_id["D"].status == "queued"
    core.step(1899.0)
    assert core.by_id["D"].status == "queued"
    core.step(1900.0)
    if gang:
        assert (core.by_id["D"].status, core.by_id["R"].status) == ("queued", "running")
        return
    assert (core.by_id["D"].status, core.by_id["R"].status) == ("running", "queued")
    (why,) = [d for t, ev, job, *_rest, d in core.log if ev == "preempt" and job == "R"]
    assert why == "fast lane: D (a)"


def test_the_funded_lane_displaces_free_work_between_plans() -> None:
    """A funded batch job arriving mid-slice on a cluster full of free work starts on
    arrival; with the lane off it waits for the next slice's plan."""
    jobs = [
        {"id": "U1", "project": "a", "gpus": 8, "duration": 4 * H, "min_runtime": 0, "resumable": True},
        {"id": "U2", "project": "a", "gpus": 8, "duration": 4 * H, "min_runtime": 0, "resumable": True},
        {"id": "B", "project": "b", "gpus": 8, "duration": 2 * H, "min_runtime": H, "submit": 200},
    ]
    s = build(jobs, nodes=2, shares={"a": 1, "b": 1})
    on = events(s)
    assert float(on[(on.job == "B") & (on.event == "start")].t.iloc[0]) == 200.0
    off = events(s, funded_lane=False)
    assert float(off[(off.job == "B") & (off.event == "start")].t.iloc[0]) >= SLICE


def test_the_funded_lane_passes_over_a_job_too_big_for_its_share_not_the_work_behind_it() -> None:
    """A funded job that would take its project above its owed share waits; a smaller job
    of that project queued behind it still displaces free work between plans."""
    s = build([
        *({"id": f"U{k}", "project": "a", "gpus": 8, "duration": 4 * H, "min_runtime": 0,
           "resumable": True} for k in range(3)),
        {"id": "BIG", "project": "b", "gpus": 16, "duration": 2 * H, "min_runtime": H, "submit": 100},
        {"id": "SMALL", "project": "b", "gpus": 8, "duration": 2 * H, "min_runtime": H, "submit": 100},
    ], nodes=3, shares={"a": 1, "b": 1})
    plan = Plan(epoch_start=0, epoch_end=H, solver=SolverInfo(backend="hand", status=SolveStatus.OPTIMAL),
                slices=tuple(Slice(start=k * SLICE, end=(k + 1) * SLICE, assignments=tuple(
                    _assign(f"U{n}", "a", f"c-h100-00{n}", 8, False) for n in range(3)))
                    for k in range(4)))
    core = Scheduler(s, HandPlanned(plan))
    core.step(0.0, [Event(SUBMIT, f"U{k}") for k in range(3)])
    # b is owed 12 of the 24 GPUs: 16 would take it above, 8 would not.
    core.step(100.0, [Event(SUBMIT, "BIG"), Event(SUBMIT, "SMALL")])
    assert core.by_id["SMALL"].status == "running"
    assert core.by_id["BIG"].status == "queued"
    assert len([row for row in core.log if row[1] == "preempt"]) == 1  # one free job made room


def test_free_work_inside_its_owed_share_is_the_last_free_victim() -> None:
    """Of free jobs on full nodes, the lanes displace those of a project running above its
    owed share, not the one of a project running within it."""
    s = build([
        {"id": "A", "project": "a", "gpus": 8, "duration": 4 * H, "min_runtime": 0, "resumable": True},
        {"id": "B1", "project": "b", "gpus": 8, "duration": 4 * H, "min_runtime": 0, "resumable": True},
        {"id": "B2", "project": "b", "gpus": 8, "duration": 4 * H, "min_runtime": 0, "resumable": True},
        {"id": "D", "project": "c", "gpus": 4, "duration": 600, "min_runtime": 300, "submit": 100},
    ], nodes=3, shares={"a": 1, "b": 1, "c": 1})
    plan = Plan(epoch_start=0, epoch_end=H, solver=SolverInfo(backend="hand", status=SolveStatus.OPTIMAL),
                slices=tuple(Slice(start=k * SLICE, end=(k + 1) * SLICE, assignments=(
                    _assign("A", "a", "c-h100-000", 8, False), _assign("B1", "b", "c-h100-001", 8, False),
                    _assign("B2", "b", "c-h100-002", 8, False))) for k in range(4)))
    policy = HandPlanned(plan)
    core = Scheduler(s, policy)
    core.step(0.0, [Event(SUBMIT, j) for j in ("A", "B1", "B2")])
    # Owed 8 GPUs each: a runs 8 (within), b runs 16 (above).
    assert policy.inside == {"a", "c"}
    core.step(100.0, [Event(SUBMIT, "D")])
    victims = {row[2] for row in core.log if row[1] == "preempt"}
    assert len(victims) == 1 and victims <= {"B1", "B2"}


def test_a_debug_job_of_unknown_duration_takes_the_fast_lane() -> None:
    """A job adopted from a live cluster has no duration: the fast lane still places it
    (on GPUs no planned start wants), instead of failing on its unknown end."""
    s = build([
        {"id": "F", "project": "a", "gpus": 8, "duration": 4 * H, "min_runtime": H},
        {"id": "G", "project": "a", "gpus": 8, "duration": 4 * H, "min_runtime": H},
    ], nodes=4, shares={"a": 1, "b": 1})
    f, g = _assign("F", "a", "c-h100-000", 8, True), _assign("G", "a", "c-h100-001", 8, True)
    plan = Plan(epoch_start=0, epoch_end=H, solver=SolverInfo(backend="hand", status=SolveStatus.OPTIMAL),
                slices=(Slice(start=0, end=SLICE, assignments=(f,)),
                        *(Slice(start=k * SLICE, end=(k + 1) * SLICE, assignments=(f, g))
                          for k in (1, 2, 3))))
    core = Scheduler(s, HandPlanned(plan))
    core.add_job(Job(id="dbg", project="b", gpus=2, duration=None, min_runtime=300))
    core.step(0.0, [Event(SUBMIT, j) for j in ("F", "G")])
    core.step(60.0, [Event(SUBMIT, "dbg")])
    dbg = core.by_id["dbg"]
    assert dbg.status == "running" and dbg.run_start == 60.0
    assert dbg.nodes != ("c-h100-001",)  # the node G's planned start wants


def test_a_debug_job_takes_gpus_a_funded_single_node_start_wants_unless_the_lane_keeps_funded() -> None:
    """H holds half of node 001 until slice 1, where the plan starts G on the whole node:
    the 4 idle GPUs there are G's. A debug job that would still run then waits for them
    when the fast lane keeps funded starts' reservations, and starts there at once when
    it keeps only gangs' or none (G then waits for it instead)."""
    s = build([
        {"id": "F", "project": "a", "gpus": 8, "duration": 4 * H, "min_runtime": H},
        {"id": "H", "project": "a", "gpus": 4, "duration": SLICE, "min_runtime": SLICE},
        {"id": "G", "project": "a", "gpus": 8, "duration": 4 * H, "min_runtime": H},
    ], nodes=2, shares={"a": 1, "b": 1})
    f, h = _assign("F", "a", "c-h100-000", 8, True), _assign("H", "a", "c-h100-001", 4, True)
    plan = _two_slices((f, h), (f, _assign("G", "a", "c-h100-001", 8, True)))
    for keeps, started in (("funded", False), ("gangs", True), ("none", True)):
        dbg = _debug_after(Scheduler(s, HandPlanned(plan, fast_lane_keeps=keeps)), ("F", "H", "G"))
        assert (dbg.status == "running") is started, keeps
        if started:
            assert dbg.nodes == ("c-h100-001",) and dbg.run_start == 60.0


def test_a_debug_job_leaves_a_funded_gangs_gpus_unless_the_lane_keeps_none() -> None:
    """H1 and H2 hold half of nodes 001 and 002 until slice 1, where the plan starts the
    16-GPU gang G across both: their idle GPUs are G's. With the fast lane keeping
    gangs' reservations a debug job that would still run then waits; keeping none, it
    starts there."""
    s = build([
        {"id": "F", "project": "a", "gpus": 8, "duration": 4 * H, "min_runtime": H},
        {"id": "H1", "project": "a", "gpus": 4, "duration": SLICE, "min_runtime": SLICE},
        {"id": "H2", "project": "a", "gpus": 4, "duration": SLICE, "min_runtime": SLICE},
        {"id": "G", "project": "a", "gpus": 16, "duration": 4 * H, "min_runtime": H},
    ], nodes=3, shares={"a": 1, "b": 1})
    f = _assign("F", "a", "c-h100-000", 8, True)
    h1, h2 = _assign("H1", "a", "c-h100-001", 4, True), _assign("H2", "a", "c-h100-002", 4, True)
    g = Assignment(job="G", project="a", cluster="c", gpu_type="H100",
                   nodes=("c-h100-001", "c-h100-002"), gpus=16, charged=True)
    plan = _two_slices((f, h1, h2), (f, g))
    for keeps, started in (("gangs", False), ("none", True)):
        dbg = _debug_after(Scheduler(s, HandPlanned(plan, fast_lane_keeps=keeps)), ("F", "H1", "H2", "G"))
        assert (dbg.status == "running") is started, keeps


def test_a_debug_job_takes_reserved_gpus_only_when_no_unreserved_hole_fits() -> None:
    """Node 001's 4 idle GPUs are G's from slice 1; node 002 has 6 idle that no one
    wants. Keeping only gangs' reservations, the debug job still goes to 002 (the best
    fit alone would pick 001 and idle the rest of G's node)."""
    s = build([
        {"id": "F", "project": "a", "gpus": 8, "duration": 4 * H, "min_runtime": H},
        {"id": "H", "project": "a", "gpus": 4, "duration": SLICE, "min_runtime": SLICE},
        {"id": "K", "project": "a", "gpus": 2, "duration": 4 * H, "min_runtime": H},
        {"id": "G", "project": "a", "gpus": 8, "duration": 4 * H, "min_runtime": H},
    ], nodes=3, shares={"a": 1, "b": 1})
    f, h = _assign("F", "a", "c-h100-000", 8, True), _assign("H", "a", "c-h100-001", 4, True)
    k = _assign("K", "a", "c-h100-002", 2, True)
    plan = _two_slices((f, h, k), (f, k, _assign("G", "a", "c-h100-001", 8, True)))
    dbg = _debug_after(Scheduler(s, HandPlanned(plan, fast_lane_keeps="gangs")), ("F", "H", "K", "G"))
    assert dbg.status == "running" and dbg.nodes == ("c-h100-002",)


def _debug_after(core: Scheduler, jobs: tuple[str, ...]) -> JobRun:
    """Submit ``jobs`` at 0 and a 2-GPU debug job of project b (20 min) at 60 s."""
    core.add_job(Job(id="dbg", project="b", gpus=2, duration=1200.0, min_runtime=300))
    core.step(0.0, [Event(SUBMIT, j) for j in jobs])
    core.step(60.0, [Event(SUBMIT, "dbg")])
    return core.by_id["dbg"]


def _two_slices(first: tuple[Assignment, ...], rest: tuple[Assignment, ...]) -> Plan:
    return Plan(epoch_start=0, epoch_end=H, solver=SolverInfo(backend="hand", status=SolveStatus.OPTIMAL),
                slices=(Slice(start=0, end=SLICE, assignments=first),
                        *(Slice(start=k * SLICE, end=(k + 1) * SLICE, assignments=rest)
                          for k in (1, 2, 3))))


def _lazy_case() -> Scenario:
    return build([
        {"id": "U", "project": "a", "gpus": 8, "duration": 4 * H, "min_runtime": 0, "resumable": True},
        {"id": "G", "project": "b", "gpus": 8, "duration": 4 * H, "min_runtime": H, "submit": H + SLICE},
    ], nodes=2, shares={"a": 1, "b": 1})


def test_free_work_the_plan_stops_runs_on_while_no_start_needs_its_gpus() -> None:
    """Each plan runs free U in slice 0 only and starts nothing on its node: U is not
    preempted at the boundary; without lazy stops it is (and backfill restarts it on the
    very GPUs it left: a restart for nothing)."""
    u = _assign("U", "a", "c-h100-000", 8, False)
    for lazy, preempted in ((True, False), (False, True)):
        core = Scheduler(_lazy_case(), HandPlanned(_two_slices((u,), ()), lazy_stops=lazy))
        core.step(0.0, [Event(SUBMIT, "U")])
        core.step(H, [])  # the next plan sees U running
        core.step(H + SLICE, [])
        log = [(t, ev, job) for t, ev, job, *_ in core.log]
        assert ((H + SLICE, "preempt", "U") in log) is preempted
        assert core.by_id["U"].status == "running"


def test_a_planned_start_takes_an_idle_node_before_evicting_free_work() -> None:
    """The plan stops free U at slice 1 to start G on U's node while the other node idles:
    G starts on the idle node and U runs on; without lazy stops U is evicted for G."""
    u = _assign("U", "a", "c-h100-000", 8, False)
    g = _assign("G", "b", "c-h100-000", 8, True)
    for lazy in (True, False):
        core = Scheduler(_lazy_case(), HandPlanned(_two_slices((u,), (g,)), lazy_stops=lazy,
                                                   early_starts=False))
        core.step(0.0, [Event(SUBMIT, "U")])
        core.step(H, [])
        core.step(H + SLICE, [Event(SUBMIT, "G")])
        assert core.by_id["G"].status == "running"
        assert core.by_id["G"].nodes == (("c-h100-001",) if lazy else ("c-h100-000",))
        log = [(t, ev, job) for t, ev, job, *_ in core.log]
        assert ((H + SLICE, "preempt", "U") in log) is not lazy


def test_charged_work_the_plan_stops_past_its_contract_runs_on_while_its_start_takes_an_idle_node() -> None:
    """The plan stops charged U (past its 15 min contract) at slice 1 to start G on U's
    node while the other node idles: G starts on the idle node and U runs on, instead of
    being preempted and restarted on the idle node (a restart for nothing); without lazy
    stops U is preempted at the boundary."""
    s = build([
        {"id": "U", "project": "a", "gpus": 8, "duration": 4 * H, "min_runtime": SLICE, "resumable": True},
        {"id": "G", "project": "b", "gpus": 8, "duration": 4 * H, "min_runtime": H, "submit": H + SLICE},
    ], nodes=2, shares={"a": 1, "b": 1})
    plan = _two_slices((_assign("U", "a", "c-h100-000", 8, True),),
                       (_assign("G", "b", "c-h100-000", 8, True),))
    for lazy in (True, False):
        core = Scheduler(s, HandPlanned(plan, lazy_stops=lazy, early_starts=False))
        core.step(0.0, [Event(SUBMIT, "U")])
        core.step(H, [])
        core.step(H + SLICE, [Event(SUBMIT, "G")])
        preempted = [job for _, ev, job, *_ in core.log if ev == "preempt"]
        assert (preempted, core.by_id["G"].status) == (([], "running") if lazy else (["U"], "running"))


def test_lazy_stops_still_empty_a_held_hole() -> None:
    """Free work the plan stops on a node held for a gang is preempted at the boundary:
    the hole must empty for the gang to start."""
    u = _assign("U", "a", "c-h100-000", 8, False)
    policy = HandPlanned(_two_slices((u,), ()), lazy_stops=True)
    core = Scheduler(_lazy_case(), policy)
    core.step(0.0, [Event(SUBMIT, "U")])
    core.step(H, [])
    policy.held = {"c-h100-000"}
    core.step(H + SLICE, [])
    log = [(t, ev, job) for t, ev, job, *_ in core.log]
    assert (H + SLICE, "preempt", "U") in log


@pytest.mark.parametrize("resumable", [False, True])
def test_a_planned_start_does_not_evict_free_running_non_resumable_funded_work(resumable: bool) -> None:
    """The plan ran funded U uncharged for over an hour, then wants its only node for G:
    non-resumable, U would lose all its progress, so it runs on and G waits; resumable,
    U loses only the restart overhead and is evicted for G."""
    s = build([
        {"id": "U", "project": "a", "gpus": 8, "duration": 4 * H, "min_runtime": SLICE,
         "resumable": resumable},
        {"id": "G", "project": "b", "gpus": 8, "duration": 4 * H, "min_runtime": H, "submit": H + SLICE},
    ], nodes=1, shares={"a": 1, "b": 1})
    plan = _two_slices((_assign("U", "a", "c-h100-000", 8, False),),
                       (_assign("G", "b", "c-h100-000", 8, True),))
    core = Scheduler(s, HandPlanned(plan, early_starts=False))
    core.step(0.0, [Event(SUBMIT, "U")])
    core.step(H, [])
    core.step(H + SLICE, [Event(SUBMIT, "G")])
    preempted = [job for _, ev, job, *_ in core.log if ev == "preempt"]
    assert (preempted, core.by_id["G"].status) == ((["U"], "running") if resumable else ([], "queued"))


def _one_free_job(resumable: bool = True, slices: int = 4) -> tuple[Scheduler, HandPlanned, JobRun]:
    """One node, one free 8-GPU job ``U`` submitted at 0, under a hand-made plan."""
    s = build([{"id": "U", "project": "a", "gpus": 8, "duration": 4 * H, "min_runtime": 0,
                "resumable": resumable}], nodes=1, shares={"a": 1})
    s = s.model_copy(update={"policy": Policy(epoch=H, slices=slices, restart_overhead=60.0)})
    policy = HandPlanned(_two_slices((), ()))
    core = Scheduler(s, policy)
    core.step(0.0, [Event(SUBMIT, "U")])
    return core, policy, core.by_id["U"]


def test_a_job_restarted_at_a_float_time_is_spared_for_exactly_one_slice() -> None:
    """Restarted at a time t where ``(t + 900) - t < 900`` in floats (arrival times of a
    what-if replicate are such floats), the job is a victim again at ``t + 900``. It used
    to stay spared there, and the wake asked for that instant repeated forever."""
    t = 15774.467022710263
    assert (t + SLICE) - t < SLICE
    core, policy, u = _one_free_job()
    u.restarts, u.run_start = 1, t
    core.now = t + SLICE - 1.0
    assert policy._young(u)
    assert core.next_timer() <= t + SLICE
    core.now = t + SLICE
    assert not policy._young(u)


def test_with_short_slices_a_restarted_job_is_spared_a_quarter_hour() -> None:
    """With 75 s slices (48 an epoch) a job restarted at 0 is still spared at 800 s, and
    a victim again at 900 s: a slice alone let the lanes restart jobs 5-9 times each."""
    core, policy, u = _one_free_job(slices=48)
    u.restarts, u.run_start = 1, 0.0
    core.now = 800.0
    assert policy._young(u)
    core.now = 900.0
    assert not policy._young(u)


@pytest.mark.parametrize(("resumable", "ran", "spared"),
                         [(False, 600.0, False), (False, 1200.0, True), (True, 1200.0, False)])
def test_the_lanes_spare_non_resumable_work_with_progress_to_lose(
    resumable: bool, ran: float, spared: bool
) -> None:
    """Free work never restarted: the lanes may displace it, unless it is non-resumable
    and has run more than a slice (15 min): its progress would be lost."""
    core, policy, u = _one_free_job(resumable=resumable)
    u.status, u.run_start = "running", 0.0
    core.now = ran
    assert policy._spared(u) is spared


def test_an_unknown_fast_lane_keeps_is_refused() -> None:
    """A misspelt setting would otherwise act as ``none`` without a word."""
    with pytest.raises(ValueError, match="fast_lane_keeps: expected one of funded, gangs, none, got 'all'"):
        MipPolicy(fast_lane_keeps="all")  # type: ignore[arg-type]


@pytest.mark.parametrize("lanes", [0, -1, True, 1.5])
def test_lanes_that_are_not_a_whole_number_of_one_or_more_are_refused(lanes: Any) -> None:
    """``lanes`` is how many processes plan a decomposed epoch: 0 or 1.5 is a mistake."""
    with pytest.raises(ValueError, match="lanes: expected a whole number of 1 or more"):
        MipPolicy(lanes=lanes)


def test_the_plans_use_the_lanes_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """``lanes`` reaches every plan_epoch call (a sweep's workers ask for one each)."""
    import planner.mip as mip_module

    asked: list[int | None] = []
    real = mip_module.plan_epoch

    def spy(*args: Any, **kwargs: Any) -> Plan:
        asked.append(kwargs.get("lanes"))
        return real(*args, **kwargs)

    monkeypatch.setattr(mip_module, "plan_epoch", spy)
    s = build([{"id": "A", "project": "a", "gpus": 8, "duration": H, "min_runtime": SLICE}],
              nodes=1, shares={"a": 1})
    simulate(s, "mip", days=2 / 24, time_limit=2.0, backend="pulp", lanes=1)
    assert asked and set(asked) == {1}


def test_non_resumable_work_arriving_between_plans_waits_rather_than_run_into_a_window() -> None:
    """Node 001 drains from 30 min to 1 h 30 min. N1 (at 0 s, the plan) takes node 000;
    N2 arrives at 60 s, with node 001 free: its 15 min contract would end before the
    window, but as non-resumable work it runs out, and the drain would throw away its
    first 29 min. It waits for the window's end, the status says maintenance, and
    maintenance stops nothing."""
    jobs = [{"id": f"N{k}", "project": p, "gpus": 8, "duration": 3 * H, "min_runtime": SLICE,
             "submit": t} for k, p, t in ((1, "a", 0.0), (2, "b", 60.0))]
    s = build(jobs, nodes=2, shares={"a": 1, "b": 1}).model_copy(update={"maintenance": (
        Maintenance(cluster="c", nodes=1, start=1800.0, duration=H),)})
    core = Scheduler(s, MipPolicy(backend="pulp", time_limit=5.0))
    core.step(0.0, [Event(SUBMIT, "N1")])
    core.step(60.0, [Event(SUBMIT, "N2")])
    assert core.by_id["N1"].nodes == ("c-h100-000",)
    assert core.by_id["N2"].status == "queued"
    status = live_status(core, wall=60.0, origin=0.0, policy="mip", executor="dry-run",
                         counters=SchedulerCounters())
    (waiting,) = status.queue
    assert waiting.reason is PendingReason.MAINTENANCE
    r = simulate(s, "mip", days=6 / 24, time_limit=5.0, backend="pulp")
    assert check_result(s, r) == []
    ev = r.events
    assert ev[ev.event == "preempt"].empty
    assert float(ev[(ev.job == "N2") & (ev.event == "start")].t.iloc[0]) >= 1800.0 + H
