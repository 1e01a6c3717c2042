"""Policy behaviours on inline scenarios small enough to follow by hand."""

from __future__ import annotations

import pytest

from models import GenerateSpec, Workloads
from planner.simulator import simulate
from planner.simulator.validate import check_result
from scenarios import load_scenario
from scenarios.generate import generate_jobs

H = 3600.0


def test_legacy_protects_up_to_the_team_limit_and_drains_the_rest(scenario):
    """With a limit of 8 protected GPUs, one of two 8-GPU jobs runs preemptible; it is the
    one on the drained node, so it leaves at the drain's start (drain time 0)."""
    s = scenario(
        [
            {"id": "A", "project": "a", "gpus": 8, "duration": 3 * H, "min_runtime": H},
            {"id": "B", "project": "a", "gpus": 8, "duration": 3 * H, "min_runtime": H},
        ],
        nodes=2,
        maintenance=[{"nodes": 1, "start": H, "duration": H}],
    )
    r = simulate(s, "legacy", days=4 / 24, protected_fraction=0.5)
    ev = r.events
    starts = ev[ev["event"] == "start"].set_index("job")
    assert sorted(starts["detail"]) == ["preemptible", "protected"]
    loose = starts.index[starts["detail"] == "preemptible"][0]
    assert starts.loc[loose, "nodes"] == s.nodes[-1].name  # the drained node
    pre = ev[ev["event"] == "preempt"]
    assert list(pre["job"]) == [loose] and list(pre["t"]) == [H]
    assert r.summary["maintenance_drain_h"] == pytest.approx(0.0)
    assert check_result(s, r) == []


def test_fairshare_runs_unallocated_work_only_on_idle_gpus_and_preempts_it(scenario):
    """Free work fills the idle node; a funded job arriving later takes it back at once."""
    s = scenario(
        [
            {"id": "U", "project": "a", "gpus": 8, "duration": 4 * H, "min_runtime": 0,
             "resumable": True},
            {"id": "F", "project": "b", "gpus": 8, "duration": H, "min_runtime": H,
             "submit": 600},
        ],
        shares={"a": 1, "b": 1},
    )
    r = simulate(s, "fairshare", days=3 / 24)
    jobs = r.jobs.set_index("job")
    assert jobs.loc["U", "first_start"] == 0.0
    assert jobs.loc["F", "wait_s"] == 0.0
    assert jobs.loc["U", "preemptions"] == 1
    assert check_result(s, r) == []


def _busy_node_and_debug_job(scenario):
    return scenario(
        [
            {"id": "F", "project": "a", "gpus": 8, "duration": 2 * H, "min_runtime": H},
            {"id": "U", "project": "a", "gpus": 8, "duration": 2 * H, "min_runtime": 0,
             "resumable": True},
            {"id": "D", "project": "a", "gpus": 1, "duration": 300, "min_runtime": 300,
             "submit": 100},
        ],
        nodes=2,
    )


def test_mip_debug_job_uses_the_fast_lane_between_decision_points(scenario):
    """A debug job arriving mid-slice on a full cluster preempts unallocated work and
    starts at once instead of waiting for the next plan."""
    s = _busy_node_and_debug_job(scenario)
    r = simulate(s, "mip", days=2 / 24, time_limit=5.0)
    assert r.jobs.set_index("job").loc["D", "wait_s"] == 0.0
    assert r.summary["plan_seconds_p50"] is not None
    assert check_result(s, r) == []


def test_mip_without_the_lanes_waits_for_a_decision_point(scenario):
    """With the fast lane and the funded lane off, the same debug job waits at least until
    a slice boundary."""
    s = _busy_node_and_debug_job(scenario)
    r = simulate(s, "mip", days=2 / 24, time_limit=5.0, fast_lane=False, funded_lane=False)
    assert r.jobs.set_index("job").loc["D", "wait_s"] >= s.policy.slice_length - 100
    assert check_result(s, r) == []


def test_mip_backfills_idle_gpus_between_decision_points(scenario):
    """A job submitted mid-slice onto an idle node starts on submission (backfill)."""
    s = scenario(
        [
            {"id": "F", "project": "a", "gpus": 8, "duration": 2 * H, "min_runtime": H},
            {"id": "G", "project": "a", "gpus": 4, "duration": H, "min_runtime": H,
             "submit": 1000},
        ],
        nodes=2,
    )
    r = simulate(s, "mip", days=2 / 24, time_limit=5.0)
    jobs = r.jobs.set_index("job")
    assert jobs.loc["G", "wait_s"] == 0.0
    assert jobs.loc["G", "end"] == pytest.approx(1000 + H)
    assert check_result(s, r) == []


def test_mip_replans_at_every_slice_when_asked():
    """replan_slices=True calls the planner at every slice boundary, and stays valid."""
    from scenarios import load_scenario

    s = load_scenario("tiny")
    r = simulate(s, "mip", days=2 / 24, time_limit=2.0, replan_slices=True)
    assert r.extra["plans"] == 2 * s.policy.slices
    assert check_result(s, r) == []


def test_legacy_gives_protected_gpus_back_when_a_job_ends(scenario):
    """A team at its 8-GPU protection limit gets the GPUs back when its job finishes: the
    next job starts protected again."""
    s = scenario([
        {"id": "A", "project": "a", "gpus": 8, "duration": H, "min_runtime": H},
        {"id": "B", "project": "a", "gpus": 8, "duration": H, "min_runtime": H,
         "submit": 2 * H},
    ])
    r = simulate(s, "legacy", days=4 / 24)
    ev = r.events
    starts = ev[ev["event"] == "start"].set_index("job")["detail"]
    assert starts.to_dict() == {"A": "protected", "B": "protected"}


def _gang_behind_a_stream(scenario):
    """4 nodes. b: B1..B4 (1 to 4 h, non-resumable) fill them at 0, then eight 3-h jobs
    arrive at 60 s; a: one free 32-GPU gang G (1 h) arrives at 60 s. Equal shares, so a
    is owed 16 GPUs and runs nothing."""
    jobs = [
        {"id": f"B{i}", "project": "b", "gpus": 8, "duration": i * H, "min_runtime": i * H,
         "resumable": False}
        for i in range(1, 5)
    ]
    jobs += [
        {"id": f"S{i}", "project": "b", "gpus": 8, "duration": 3 * H, "min_runtime": 3 * H,
         "resumable": False, "submit": 60.0}
        for i in range(8)
    ]
    jobs.append({"id": "G", "project": "a", "gpus": 32, "duration": H, "min_runtime": 0,
                 "submit": 60.0})
    return scenario(jobs, nodes=4, shares={"a": 1, "b": 1})


def test_mip_holds_a_hole_for_a_waiting_gang_of_an_underserved_project(scenario):
    """A held hole: at the 2 h epoch (G has waited an epoch) G's project (owed 16, running
    0) gets a hold on the 4 nodes; no b job starts between then and 4 h although B2 and
    B3 end at 2 h and 3 h, and G starts the moment the last contract there ends (B4, and
    S0 started at 1 h on B1's node, both end at 4 h). Without holds, each node a contract frees is refilled by b's stream and G
    has not started at the 10 h horizon."""
    s = _gang_behind_a_stream(scenario)
    held = simulate(s, "mip", days=10 / 24, hold_fraction=1.0, time_limit=5)
    ev = held.events
    start = ev[(ev["job"] == "G") & (ev["event"] == "start")]
    assert list(start["t"]) == [4 * H]
    assert list(start["detail"]) == ["unallocated held hole"]
    b_starts = ev[(ev["project"] == "b") & (ev["event"] == "start")]["t"]
    assert not ((b_starts >= 2 * H) & (b_starts < 4 * H)).any()
    assert check_result(s, held) == []
    plain = simulate(s, "mip", days=10 / 24, holds=False, time_limit=5)
    assert not plain.jobs.set_index("job").loc["G", "started"]
    assert check_result(s, plain) == []


def _node_freed_in_mid_slice(scenario):
    """2 nodes: A (2 h) on one, B (5 min) on the other, then C on B's node in slice 1;
    U (free, 4 GPUs, 1 h) arrives at 6 min."""
    return scenario(
        [
            {"id": "A", "project": "a", "gpus": 8, "duration": 2 * H, "min_runtime": H,
             "resumable": False},
            {"id": "B", "project": "a", "gpus": 8, "duration": 300.0, "min_runtime": 300.0,
             "resumable": False},
            {"id": "C", "project": "a", "gpus": 8, "duration": H, "min_runtime": H,
             "resumable": False},
            {"id": "U", "project": "a", "gpus": 4, "duration": H, "min_runtime": 0,
             "submit": 360.0},
        ],
        nodes=2,
    )


def test_mip_free_backfill_keeps_off_gpus_a_start_needs_within_the_slice(scenario):
    """Free work does not backfill GPUs the plan starts work on within the next slice.

    2 nodes. The plan at 0 runs A (2 h) on one node and B (5 min) on the other, and
    starts C there in slice 1 (at 15 min). B ends at 5 min; U (free, 4 GPUs, 1 h) arrives
    at 6 min: the idle node is C's from 15 min, so U waits (it used to start there at
    6 min and be evicted by C at 15 min) and starts when C ends at 75 min, never
    preempted.
    """
    s = _node_freed_in_mid_slice(scenario)
    # Without early starts: C would otherwise take the idle node at 5 min itself.
    r = simulate(s, "mip", days=2 / 24, time_limit=5.0, early_starts=False)
    jobs = r.jobs.set_index("job")
    assert jobs.loc["C", "first_start"] == 900.0
    assert jobs.loc["U", "first_start"] == 4500.0
    assert jobs.loc["U", "preemptions"] == 0
    assert check_result(s, r) == []


def test_mip_starts_a_later_planned_start_early_on_its_freed_nodes(scenario):
    """GPUs freed in mid-slice go to the job the plan starts there at a later slice.

    The plan at 0 runs A (2 h) on one node and B (5 min) on the other, and starts C on
    B's node in slice 1 (at 15 min). B ends at 5 min: C starts then, on its planned node,
    instead of the node idling for 10 minutes; U (free, arrives at 6 min) finds no room
    and starts when C ends, never preempted.
    """
    s = _node_freed_in_mid_slice(scenario)
    r = simulate(s, "mip", days=2 / 24, time_limit=5.0)
    jobs = r.jobs.set_index("job")
    ev = r.events
    c_start = ev[(ev["job"] == "C") & (ev["event"] == "start")]
    b_nodes = ev[(ev["job"] == "B") & (ev["event"] == "start")]["nodes"].iloc[0]
    assert list(c_start["t"]) == [300.0]
    assert c_start["detail"].iloc[0].endswith(" early")
    assert c_start["nodes"].iloc[0] == b_nodes
    assert jobs.loc["U", "first_start"] == 300.0 + H
    assert jobs.loc["U", "preemptions"] == 0
    assert check_result(s, r) == []


def _two_contracts_before_a_window(scenario, fence: bool = True):  # type: ignore[no-untyped-def]
    """Node 2 goes for maintenance from 1 h to 2 h; two 8-GPU jobs with 2 h contracts
    arrive at 0."""
    return scenario(
        [
            {"id": "A", "project": "a", "gpus": 8, "duration": 3 * H, "min_runtime": 2 * H},
            {"id": "B", "project": "a", "gpus": 8, "duration": 3 * H, "min_runtime": 2 * H},
        ],
        nodes=2,
        maintenance=[{"nodes": 1, "start": H, "duration": H}],
        policy={"maintenance_fence": fence},
    )


@pytest.mark.parametrize("policy", ["fairshare", "mip"])
def test_no_contract_is_started_into_an_announced_maintenance_window(scenario, policy):
    """A start on node 2 would hold its drain up until 2 h, so one job runs on node 1 and
    the other waits for node 2 to come back. The drain takes no time."""
    s = _two_contracts_before_a_window(scenario)
    r = simulate(s, policy, days=6 / 24)
    starts = r.events[r.events["event"] == "start"].set_index("job")
    drained = s.nodes[-1].name
    first = starts[starts["t"] == 0.0]
    assert len(first) == 1 and drained not in first["nodes"].iloc[0]
    assert sorted(starts["t"]) == [0.0, 2 * H]
    assert r.summary["maintenance_drain_h"] == pytest.approx(0.0)
    assert r.summary["preemptions"] == 0
    assert check_result(s, r) == []


@pytest.mark.parametrize("policy", ["fairshare", "mip"])
def test_a_contract_that_ends_before_the_window_may_start_on_its_node(scenario, policy):
    """The same, with 30 min contracts: both jobs start at 0; the one on node 2 is past
    its contract when the window opens at 1 h and moves off at once."""
    s = scenario(
        [
            {"id": "A", "project": "a", "gpus": 8, "duration": 3 * H, "min_runtime": 1800,
             "resumable": True},
            {"id": "B", "project": "a", "gpus": 8, "duration": 3 * H, "min_runtime": 1800,
             "resumable": True},
        ],
        nodes=2,
        maintenance=[{"nodes": 1, "start": H, "duration": H}],
    )
    r = simulate(s, policy, days=6 / 24)
    starts = r.events[r.events["event"] == "start"]
    assert list(starts["t"]) == [0.0, 0.0]
    assert r.summary["maintenance_drain_h"] == pytest.approx(0.0)


@pytest.mark.parametrize("policy", ["fairshare", "mip"])
def test_without_the_fence_a_contract_holds_the_drain_up(scenario, policy):
    """``maintenance_fence: false``: both jobs start at 0 and the one on node 2 keeps it
    through the whole window (its contract ends as the window does) and runs on to its
    end at 3 h: the drain counts 2 h."""
    r = simulate(_two_contracts_before_a_window(scenario, fence=False), policy, days=6 / 24)
    starts = r.events[r.events["event"] == "start"]
    assert list(starts["t"]) == [0.0, 0.0]
    assert r.summary["maintenance_drain_h"] == pytest.approx(2.0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_legacy_never_preempts_a_job_at_the_instant_it_started(seed):
    """A job that would start protected takes its victims before idle GPUs are handed
    out: no run starts and is preempted at one instant (before, a job that had just
    backfilled was the cheapest victim, no GPU time lost yet). Some preemption happens."""
    base = load_scenario("tiny")
    spec = GenerateSpec(seed=seed, days=1, load=1.5, users=6, backlog=6 * H)
    s = base.model_copy(update={"workloads": Workloads(jobs=tuple(generate_jobs(base, spec)))})
    ev = simulate(s, "legacy", days=1).events
    started: dict[str, float] = {}
    zero = []
    for t, kind, job in zip(ev["t"], ev["event"], ev["job"], strict=True):
        if kind in ("start", "resume"):
            started[job] = t
        elif kind == "preempt" and started.get(job) == t:
            zero.append(job)
    assert (ev["event"] == "preempt").any()
    assert zero == []


def test_fairshare_starts_funded_arrivals_before_free_ones_of_the_same_instant(scenario):
    """A free job and a funded one arrive at once for the only node: the funded one
    starts; the free one is not started and preempted at that instant (a run of no
    length), it waits."""
    s = scenario(
        [
            {"id": "U", "project": "a", "gpus": 8, "duration": H, "min_runtime": 0},
            {"id": "F", "project": "b", "gpus": 8, "duration": H, "min_runtime": 1800},
        ],
        nodes=1,
        shares={"a": 1.0, "b": 1.0},
    )
    r = simulate(s, "fairshare", days=3 / 24)
    ev = r.events
    assert list(ev[ev["event"] == "start"]["job"]) == ["F", "U"]
    assert r.summary["preemptions"] == 0


@pytest.mark.parametrize("policy", ["legacy", "fairshare", "mip"])
def test_a_job_that_ends_at_the_horizon_is_finished(scenario, policy):
    """Submitted at 30 min for 90 min: the default horizon (2 h) is where it ends, and it
    is reported finished there, not cut off."""
    s = scenario([{"id": "j", "project": "a", "gpus": 4, "duration": 1.5 * H, "min_runtime": 0,
                   "submit": 0.5 * H, "resumable": True}])
    jobs = simulate(s, policy).jobs.set_index("job")
    assert jobs.loc["j", "end"] == pytest.approx(2 * H)
    assert bool(jobs.loc["j", "finished"])
    assert check_result(s, simulate(s, policy)) == []
