"""Build the frozen :class:`~models.Snapshot` an epoch is planned from.

There is one way to build a snapshot, :func:`build_snapshot`; the CLI uses it through
:func:`snapshot_at` (the queue of a scenario at a time, nothing running), the simulator
with its own job states and standings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from models import JobState, Node, NodeState, ProjectStanding, Scenario, Snapshot
from planner.fairshare import demand_at, org_at, standings
from planner.ledger import Ledger


def maintenance_nodes(scenario: Scenario) -> list[tuple[str, ...]]:
    """The node names each of the scenario's maintenance windows drains, in window order.

    A window given by count drains the *last* ``nodes`` nodes of the cluster (of its
    ``gpu_type`` when given), so the choice is deterministic. This is the one rule the
    snapshot and the scheduler's drain events both follow.
    """
    by_cluster: dict[str, tuple[Node, ...]] = {c.name: c.nodes() for c in scenario.clusters}
    out: list[tuple[str, ...]] = []
    for m in scenario.maintenance:
        if m.node_names is not None:
            out.append(tuple(m.node_names))
            continue
        pool = [n.name for n in by_cluster[m.cluster] if m.gpu_type in (None, n.gpu_type)]
        out.append(tuple(pool[len(pool) - (m.nodes or 0) :]))
    return out


def maintenance_windows(scenario: Scenario) -> dict[str, list[tuple[float, float]]]:
    """Each node's maintenance windows ``(start, end)`` (nodes by :func:`maintenance_nodes`)."""
    out: dict[str, list[tuple[float, float]]] = {}
    for m, names in zip(scenario.maintenance, maintenance_nodes(scenario), strict=True):
        for name in names:
            out.setdefault(name, []).append((m.start, m.end))
    return out


def node_states(scenario: Scenario, start: float, end: float) -> tuple[NodeState, ...]:
    """Every node, with the maintenance window that overlaps ``[start, end)`` if any,
    and the start of its next window after ``end``.

    When several windows of a node overlap the epoch, the node is drained from the
    first one's start to the last one's end (a node state holds one window).
    """
    windows = maintenance_windows(scenario)
    out: list[NodeState] = []
    for node in scenario.nodes:
        spans = windows.get(node.name, [])
        hits = [(s, e) for s, e in spans if s < end and e > start]
        later = min((s for s, _ in spans if s >= end), default=None)
        if hits:
            out.append(
                NodeState(
                    node=node,
                    drain_start=min(s for s, _ in hits),
                    drain_end=max(e for _, e in hits),
                    next_drain=later,
                )
            )
        else:
            out.append(NodeState(node=node, next_drain=later))
    return tuple(out)


def build_snapshot(
    scenario: Scenario,
    now: float,
    jobs: Iterable[JobState],
    standing: Mapping[str, ProjectStanding] | None = None,
    *,
    ledger: Ledger | None = None,
    demand: Mapping[str, float] | None = None,
) -> Snapshot:
    """A snapshot of ``scenario`` at ``now`` with the given job states.

    Parameters
    ----------
    scenario
        Clusters, org, policy and maintenance.
    now
        The epoch's start (seconds from the scenario's start).
    jobs
        Queued and running jobs as the caller sees them.
    standing
        Fair-share standings; computed with :func:`planner.fairshare.standings` from
        ``ledger`` and ``demand`` when not given.
    ledger
        Usage history for the standings (``None``: no history).
    demand
        H100-equivalent GPUs each project wants now; defaults to
        :func:`planner.fairshare.demand_at`.
    """
    policy = scenario.policy
    if standing is None:
        org = org_at(scenario, now)
        want = demand if demand is not None else demand_at(scenario, now)
        standing = standings(org, want, scenario.capacity_h100(), ledger, now, policy)
    return Snapshot(
        now=now,
        origin=scenario.start,
        policy=policy,
        gpu_types=dict(scenario.gpu_types),
        org=org_at(scenario, now),
        nodes=node_states(scenario, now, now + policy.epoch),
        jobs=tuple(jobs),
        standing=dict(standing),
    )


def queue_at(scenario: Scenario, t: float) -> tuple[JobState, ...]:
    """The jobs waiting at ``t`` when nothing of the scenario has run.

    A job waits from its submission until it would have completed had it started at
    once (``submit <= t < submit + duration``; with no known duration, from its
    submission on): the same jobs :func:`planner.fairshare.demand_at` counts as demand,
    so the queue and the owed shares agree.
    """
    return tuple(
        JobState(job=j, status="queued")
        for j in scenario.jobs
        if j.submit <= t and (j.duration is None or t < j.submit + j.duration)
    )


def snapshot_at(scenario: Scenario, t: float, ledger: Ledger | None = None) -> Snapshot:
    """The snapshot at ``t``: the queue at ``t`` (:func:`queue_at`), nothing running.

    Nodes carry the maintenance windows that overlap the epoch ``[t, t + epoch)``;
    standings come from :mod:`planner.fairshare` with ``ledger`` as history.
    """
    return build_snapshot(scenario, t, queue_at(scenario, t), ledger=ledger)
