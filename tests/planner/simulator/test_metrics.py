"""Hand-checked metrics on tiny inline scenarios (the expected values are worked out in
each test's comments)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from models import Cluster, Job, NodeGroup, OrgUnit, Scenario, Workloads
from planner.scheduler.state import wait_class
from planner.simulator import SUMMARY_KEYS, simulate
from planner.simulator.metrics import bin_hours
from planner.simulator.validate import check_result

H = 3600.0


def test_summary_has_exactly_the_issue_metric_names(scenario):
    """The summary holds exactly the metrics of summary.json, waits as class maps."""
    s = scenario([{"id": "j", "project": "a", "gpus": 8, "duration": H}])
    r = simulate(s, "fairshare", days=1 / 24)
    assert tuple(r.summary) == SUMMARY_KEYS
    for key in ("wait_p50_s", "wait_p90_s", "wait_p99_s"):
        assert set(r.summary[key]) == {"debug", "large", "batch", "all"}


def test_one_job_half_the_horizon(scenario):
    """One 8-GPU job for 2 h on one 8-GPU node over 4 h: occupancy 0.5, all owed delivered."""
    s = scenario([{"id": "j", "project": "a", "gpus": 8, "duration": 2 * H}])
    r = simulate(s, "fairshare", days=4 / 24)
    m = r.summary
    assert m["occupancy"] == pytest.approx(16 / 32)
    assert m["delivered_over_owed"] == pytest.approx(1.0)
    assert m["worst_project_delivered_over_owed"] == pytest.approx(1.0)
    assert m["jain_index"] == pytest.approx(1.0)
    assert m["wait_p90_s"]["all"] == 0.0
    assert m["unallocated_share"] == 0.0
    assert (m["preemptions"], m["preempted_gpu_h"], m["restarts_per_job"]) == (0, 0.0, 0.0)
    assert m["maintenance_drain_h"] is None
    assert m["plan_seconds_p50"] is None and m["plan_seconds_p99"] is None
    assert r.occupancy["busy"].tolist() == [8, 8, 0, 0]


def test_owed_is_water_filled_hour_by_hour(scenario):
    """Shares 3:1 on 8 GPUs, both want 8: owed 6 and 2 per hour; a runs, b starves.

    A (project a, non-resumable, 2 h) starts first (equal standing, name order) and is
    never preempted; B waits to the 2 h horizon. Per hour a gets min(8, 6) = 6 of its 6
    owed, b 0 of 2: aggregate 12 / 16, a 1.0, b 0.0, Jain (1 + 0)^2 / (2 x 1) = 0.5.
    Waits 0 and 7200 (censored at the horizon): p50 3600, p90 6480.
    """
    s = scenario(
        [
            {"id": "A", "project": "a", "gpus": 8, "duration": 2 * H, "min_runtime": H},
            {"id": "B", "project": "b", "gpus": 8, "duration": H, "min_runtime": H},
        ],
        shares={"a": 3, "b": 1},
    )
    r = simulate(s, "fairshare", days=2 / 24)
    m = r.summary
    assert m["delivered_over_owed"] == pytest.approx(0.75)
    p = r.projects.set_index("project")
    assert p.loc["a", "owed_gpu_h"] == pytest.approx(12.0)
    assert p.loc["b", "owed_gpu_h"] == pytest.approx(4.0)
    assert p.loc["a", "delivered_over_owed"] == pytest.approx(1.0)
    assert p.loc["b", "delivered_over_owed"] == pytest.approx(0.0)
    assert m["worst_project_delivered_over_owed"] == pytest.approx(0.0)
    assert m["jain_index"] == pytest.approx(0.5)
    assert m["wait_p50_s"]["all"] == pytest.approx(3600.0)
    assert m["wait_p90_s"]["all"] == pytest.approx(6480.0)
    assert m["wait_p90_s"]["batch"] == pytest.approx(6480.0)
    assert m["wait_p90_s"]["debug"] is None
    jobs = r.jobs.set_index("job")
    assert not jobs.loc["B", "started"]


def test_fair_share_preemption_keeps_progress_less_overhead(scenario):
    """A resumable job ahead of its share is preempted at its contract end and resumes.

    A (a, 2 h, resumable, contract 1 h) runs from 0; at 1 h its contract ends and b (ratio
    0, behind) preempts it: B runs 1-2 h. A keeps 3600 - 120 = 3480 s of progress and
    resumes at 2 h for 3720 s, ending at 10920 s. Lost: 120 s x 8 GPUs = 0.267 GPU-h.
    Hour by hour (owed, delivered) a: (6, 8), (6, 0), (8, 8), (x, x) with
    x = 8 x 120 / 3600; b: (2, 0), (2, 8).
    """
    s = scenario(
        [
            {"id": "A", "project": "a", "gpus": 8, "duration": 2 * H, "min_runtime": H,
             "resumable": True},
            {"id": "B", "project": "b", "gpus": 8, "duration": H, "min_runtime": H},
        ],
        shares={"a": 3, "b": 1},
    )
    r = simulate(s, "fairshare", days=4 / 24)
    jobs = r.jobs.set_index("job")
    assert jobs.loc["A", "end"] == pytest.approx(2 * H + 2 * H - (H - 120))
    assert jobs.loc["B", "first_start"] == pytest.approx(H)
    assert jobs.loc["A", "preemptions"] == 1 and jobs.loc["A", "restarts"] == 1
    m = r.summary
    assert m["preemptions"] == 1
    assert m["preempted_gpu_h"] == pytest.approx(120 * 8 / H)
    assert m["restarts_per_job"] == pytest.approx(0.5)
    x = 8 * 120 / H
    assert m["delivered_over_owed"] == pytest.approx((6 + 0 + 2 + 8 + x) / (8 + 8 + 8 + x))
    p = r.projects.set_index("project")["delivered_over_owed"]
    assert p["a"] == pytest.approx((6 + 8 + x) / (6 + 6 + 8 + x))
    assert p["b"] == pytest.approx(0.5)
    assert check_result(s, r) == []


def _maintenance_case(scenario):
    return scenario(
        [
            {"id": "J1", "project": "a", "gpus": 8, "duration": 3 * H, "min_runtime": 1800},
            {"id": "J2", "project": "a", "gpus": 8, "duration": 3 * H, "min_runtime": 1800},
        ],
        nodes=2,
        maintenance=[{"nodes": 1, "start": H, "duration": H}],
    )


def test_legacy_protected_job_blocks_the_drain(scenario):
    """Legacy: J2 (protected) on the drained node runs to its end at 3 h: drain 2 h.

    Occupancy excludes the drained node for 1-2 h: available 64 - 8 = 56 GPU-h; busy on
    open nodes J1 24 + J2 16 = 40.
    """
    s = _maintenance_case(scenario)
    r = simulate(s, "legacy", days=4 / 24)
    assert r.summary["maintenance_drain_h"] == pytest.approx(2.0)
    assert r.summary["occupancy"] == pytest.approx(40 / 56)
    assert r.summary["preemptions"] == 0
    assert check_result(s, r) == []


def test_fairshare_drains_at_contract_end_and_non_resumable_restarts(scenario):
    """Fairshare: J2 is past its 30 min contract at the 1 h drain, so it moves off at once
    (drain 0 h), losing its 8 GPU-hours of progress, and restarts when the node returns at
    2 h. Busy: J1 24 + J2 (0-1 h, 2-4 h) 24 of 56 available."""
    s = _maintenance_case(scenario)
    r = simulate(s, "fairshare", days=4 / 24)
    m = r.summary
    assert m["maintenance_drain_h"] == pytest.approx(0.0)
    assert m["preempted_gpu_h"] == pytest.approx(8.0)
    assert m["occupancy"] == pytest.approx(48 / 56)
    jobs = r.jobs.set_index("job")
    assert jobs.loc["J2", "restarts"] == 1
    assert check_result(s, r) == []


def test_unallocated_share_counts_free_work(scenario):
    """A funded and an unallocated 4-GPU job share one node for 1 h: half is unallocated."""
    s = scenario(
        [
            {"id": "F", "project": "a", "gpus": 4, "duration": H, "min_runtime": 1800},
            {"id": "U", "project": "a", "gpus": 4, "duration": H, "min_runtime": 0},
        ]
    )
    r = simulate(s, "fairshare", days=1 / 24)
    assert r.summary["unallocated_share"] == pytest.approx(0.5)
    assert r.summary["occupancy"] == pytest.approx(1.0)


def test_delivered_and_owed_are_h100_equivalents(scenario):
    """8 B200 GPUs (rate 2) for 1 h deliver and owe 16 H100-equivalent GPU-hours."""
    s = scenario([{"id": "j", "project": "a", "gpus": 8, "duration": H}], gpu_type="B200")
    r = simulate(s, "fairshare", days=1 / 24)
    p = r.projects.set_index("project")
    assert p.loc["a", "delivered_gpu_h"] == pytest.approx(16.0)
    assert p.loc["a", "owed_gpu_h"] == pytest.approx(16.0)
    assert r.summary["delivered_over_owed"] == pytest.approx(1.0)


def test_debug_wait_is_measured_submit_to_first_start(scenario):
    """A debug job submitted at 60 s behind a 1 h contract on the only node waits 3540 s."""
    s = scenario(
        [
            {"id": "F", "project": "a", "gpus": 8, "duration": H, "min_runtime": H},
            {"id": "D", "project": "a", "gpus": 2, "duration": 300, "min_runtime": 600,
             "submit": 60},
        ]
    )
    r = simulate(s, "fairshare", days=2 / 24)
    assert r.summary["wait_p50_s"]["debug"] == pytest.approx(3540.0)
    assert r.summary["wait_p50_s"]["batch"] == pytest.approx(0.0)


@pytest.mark.parametrize(
    ("gpus", "min_runtime", "expected"),
    [(8, 900, "debug"), (1, 0, "debug"), (8, 901, "batch"), (9, 60, "batch"),
     (63, 3600, "batch"), (64, 60, "large")],
)
def test_wait_class_follows_the_shape(gpus, min_runtime, expected):
    """debug: <= 8 GPUs and min runtime <= 15 min; large: >= 64 GPUs; batch: the rest."""
    job = Job(id="j", project="a", gpus=gpus, min_runtime=min_runtime, duration=60)
    assert wait_class(job) == expected


def test_bin_hours_splits_intervals_across_hours():
    """An interval from 0.5 h to 2.25 h of weight 4 adds 2, 4 and 1 GPU-hours to hours 0-2."""
    grid = bin_hours(np.array([1800.0]), np.array([8100.0]), np.array([4.0]),
                     np.array([0]), 1, 4)
    assert grid[0].tolist() == pytest.approx([2.0, 4.0, 1.0, 0.0])
    assert not math.isnan(grid.sum())


def test_drain_ends_when_the_work_present_at_its_start_has_left(scenario):
    """Legacy: P (protected, 0-3 h) blocks a 1-2 h drain; Q lands on the node at 2.5 h,
    after the window, and runs to 4.5 h. The drain took 3 h - 1 h = 2 h: Q does not count."""
    s = scenario(
        [
            {"id": "P", "project": "a", "gpus": 4, "duration": 3 * H, "min_runtime": H},
            {"id": "Q", "project": "a", "gpus": 4, "duration": 2 * H, "min_runtime": H,
             "submit": 2.5 * H},
        ],
        maintenance=[{"nodes": 1, "start": H, "duration": H}],
    )
    r = simulate(s, "legacy", days=6 / 24)
    jobs = r.jobs.set_index("job")
    assert jobs.loc["Q", "first_start"] == pytest.approx(2.5 * H)
    assert r.summary["maintenance_drain_h"] == pytest.approx(2.0)


def test_waiting_demand_counts_at_the_cheapest_type_until_the_job_starts():
    """A waiting job's demand is at its cheapest allowed type, then at the type it ran on.

    One H100 node (rate 1) and one B200 node (rate 2). At 0, A1 (H100 only, 2 h) and B1
    (B200 only, 1 h) start; W (any type, 8 GPUs, 1 h) arrives at 1 s and waits until B1
    ends at 1 h, then runs on the B200. Demand of project a:
    hour 0: A1 8 + B1 16 + W waiting at H100's rate 8 x 3599/3600 = 31.998 (not W at the
    B200 rate it got later, 8 x 2 x 3599/3600, which would give 39.996);
    hour 1: A1 8 + W on B200 16 = 24.
    """
    jobs = [
        {"id": "A1", "project": "a", "gpus": 8, "duration": 2 * H, "min_runtime": H,
         "gpu_types": ["H100"]},
        {"id": "B1", "project": "a", "gpus": 8, "duration": H, "min_runtime": H,
         "gpu_types": ["B200"]},
        {"id": "W", "project": "a", "gpus": 8, "duration": H, "min_runtime": H, "submit": 1.0},
    ]
    s = Scenario(
        name="two-types",
        clusters=(Cluster(name="c", node_groups=(NodeGroup(gpu_type="H100", nodes=1),
                                                 NodeGroup(gpu_type="B200", nodes=1))),),
        org=(OrgUnit(name="a", share=1.0),),
        workloads=Workloads(jobs=tuple(Job(**j) for j in jobs)),
    )
    r = simulate(s, "fairshare", days=2 / 24)
    assert r.jobs.set_index("job").loc["W", "pool"] == "c/B200"
    demand = r.hourly.set_index("hour")["demand_gpu_h"]
    assert demand[0] == pytest.approx(8 + 16 + 8 * 3599 / 3600)
    assert demand[1] == pytest.approx(24.0)


@pytest.mark.parametrize("policy", ["legacy", "fairshare", "mip"])
def test_a_node_in_two_overlapping_windows_opens_when_the_last_ends(scenario, policy):
    """Windows 0-2 h and 1-3 h on the one node: J (submitted at 0) waits until 3 h, not
    until the first window ends at 2 h; the node is not available in hours 0-2."""
    s = scenario(
        [{"id": "J", "project": "a", "gpus": 8, "duration": H, "min_runtime": H}],
        maintenance=[{"nodes": 1, "start": 0.0, "duration": 2 * H},
                     {"nodes": 1, "start": H, "duration": 2 * H}],
    )
    r = simulate(s, policy, days=5 / 24, **({"time_limit": 2.0} if policy == "mip" else {}))
    assert r.jobs.set_index("job").loc["J", "first_start"] == pytest.approx(3 * H)
    assert check_result(s, r) == []
    assert r.occupancy["available"].tolist()[:4] == [0.0, 0.0, 0.0, 8.0]


def test_restarts_per_job_is_null_without_jobs(scenario):
    """No job submitted within the horizon: restarts per job does not apply (0/0)."""
    s = scenario([{"id": "late", "project": "a", "gpus": 8, "duration": H, "submit": 10 * H}])
    assert simulate(s, "fairshare", days=2 / 24).summary["restarts_per_job"] is None
