"""Snapshots of a scenario at a time: queue, maintenance drains, standings."""

from __future__ import annotations

import pytest

from models import JobState, Maintenance
from planner.fairshare import standings_at
from planner.snapshot import build_snapshot, maintenance_windows, node_states, snapshot_at
from scenarios import load_scenario


@pytest.fixture(scope="module")
def tiny():  # type: ignore[no-untyped-def]
    return load_scenario("tiny")


def test_queue_holds_submitted_jobs_not_yet_due(tiny) -> None:  # type: ignore[no-untyped-def]
    """At 1h the queue holds jobs submitted by then that would not have completed."""
    snap = snapshot_at(tiny, 3600.0)
    ids = {s.job.id for s in snap.jobs}
    # j4 (15m + 20m) and j7 (45m + 10m) would be done; j9 (2h) not yet submitted.
    assert ids == {"j1", "j2", "j3", "j5", "j6", "j8"}
    assert all(s.status == "queued" and s.progress == 0.0 for s in snap.jobs)


def test_count_maintenance_drains_last_nodes(tiny) -> None:  # type: ignore[no-untyped-def]
    """A count-based window drains the cluster's last nodes."""
    assert maintenance_windows(tiny) == {"alpha-h100-003": [(7200.0, 21600.0)]}


def test_drain_only_when_overlapping_epoch(tiny) -> None:  # type: ignore[no-untyped-def]
    """Nodes carry a window only when it overlaps [t, t + epoch)."""
    before = {n.node.name: n for n in node_states(tiny, 0.0, 3600.0)}
    assert all(n.drain_start is None for n in before.values())
    during = {n.node.name: n for n in snapshot_at(tiny, 5400.0).nodes}
    assert during["alpha-h100-003"].drain_start == 7200.0
    assert during["alpha-h100-003"].drain_end == 21600.0
    assert during["alpha-h100-002"].drain_start is None


def test_gpu_type_count_maintenance(tiny) -> None:  # type: ignore[no-untyped-def]
    """With a GPU type, the last nodes of that type in the cluster are drained."""
    s = tiny.model_copy(
        update={"maintenance": (Maintenance(cluster="beta", nodes=1, gpu_type="B200", start=0.0, duration=60.0),)}
    )
    assert maintenance_windows(s) == {"beta-b200-001": [(0.0, 60.0)]}


def test_standings_come_from_fair_share(tiny) -> None:  # type: ignore[no-untyped-def]
    """Without a ledger the standings equal planner.fairshare.standings_at."""
    snap = snapshot_at(tiny, 3600.0)
    assert snap.standing == standings_at(tiny, 3600.0)
    assert set(snap.standing) == set(tiny.projects)


def test_build_snapshot_keeps_given_states_and_standing(tiny) -> None:  # type: ignore[no-untyped-def]
    """build_snapshot uses the caller's job states and standings as given."""
    standing = standings_at(tiny, 0.0)
    state = JobState(job=tiny.jobs[0], status="queued", progress=600.0)
    snap = build_snapshot(tiny, 0.0, [state], standing)
    assert snap.jobs == (state,)
    assert snap.standing == standing
    assert snap.policy == tiny.policy
    assert len(snap.nodes) == len(tiny.nodes)


def test_a_node_knows_its_next_window_after_the_epoch(tiny) -> None:  # type: ignore[no-untyped-def]
    """Before the epoch that meets the window, the node carries only when it opens."""
    nodes = {n.node.name: n for n in node_states(tiny, 0.0, 3600.0)}
    assert nodes["alpha-h100-003"].next_drain == 7200.0
    assert nodes["alpha-h100-003"].drain_start is None
    assert nodes["alpha-h100-002"].next_drain is None
    during = {n.node.name: n for n in node_states(tiny, 7200.0, 10800.0)}
    assert during["alpha-h100-003"].next_drain is None
