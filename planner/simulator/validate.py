"""An independent check of a simulation's event log.

It replays the log against the scenario alone (nodes, jobs, maintenance windows, policy
knobs), sharing no state or code with the engine beyond the log's format, and reports
every broken rule:

- no node ever holds more GPUs than it has;
- a gang is whole: one allowed pool, one node when it fits one, else
  ``ceil(gpus / gpus_per_node)`` whole nodes;
- no job starts before its submission, twice at once, or on a node inside a maintenance
  window;
- the contract: under ``fairshare`` and ``mip`` no job is preempted inside its minimum
  runtime, and non-resumable funded work only for maintenance; under ``legacy`` no
  protected job is preempted;
- progress: a job finishes exactly when its remaining work is done (resumable jobs keep
  their progress less ``policy.restart_overhead``; others restart from zero).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from models import Scenario

TOL = 1e-6


def check_events(scenario: Scenario, policy: str, events: pd.DataFrame) -> list[str]:
    """Every rule the event log breaks, as readable messages (empty when all hold)."""
    size = {n.name: n.gpus for n in scenario.nodes}
    pool_of = {n.name: (n.cluster, n.gpu_type) for n in scenario.nodes}
    jobs = {j.id: j for j in scenario.jobs}
    windows: dict[str, list[tuple[float, float]]] = {}
    for m in scenario.maintenance:
        if m.node_names is not None:
            names = list(m.node_names)
        else:
            home = next(c for c in scenario.clusters if c.name == m.cluster)
            names = [n.name for n in home.nodes() if m.gpu_type in (None, n.gpu_type)]
            names = names[-(m.nodes or 0):]
        for n in names:
            windows.setdefault(n, []).append((m.start, m.end))
    overhead = scenario.policy.restart_overhead

    used = dict.fromkeys(size, 0)
    running: dict[str, dict[str, Any]] = {}
    progress: dict[str, float] = {}
    errors: list[str] = []

    def bad(t: float, msg: str) -> None:
        errors.append(f"t={t:g}s: {msg}")

    last_t = -math.inf
    rows: list[tuple[Any, ...]] = list(
        events[["t", "event", "job", "nodes", "detail"]].itertuples(index=False, name=None)
    )
    for t_raw, kind_raw, job_raw, nodes_raw, detail_raw in rows:
        t = float(t_raw)
        kind = str(kind_raw)
        detail = str(detail_raw)
        if t < last_t - TOL:
            bad(t, f"event log goes back in time (after {last_t:g}s)")
        last_t = t
        if kind in ("drain_start", "drain_end", "drained", "plan", "requeue"):
            continue
        job = jobs.get(str(job_raw))
        if job is None:
            bad(t, f"{kind} of unknown job {job_raw!r}")
            continue
        nodes = [n for n in str(nodes_raw).split(",") if n]
        if kind == "submit":
            if abs(t - job.submit) > TOL:
                bad(t, f"job {job.id} submitted at {t:g}s, the workload says {job.submit:g}s")
            progress.setdefault(job.id, 0.0)
            continue
        if kind in ("start", "resume"):
            if job.id in running:
                bad(t, f"job {job.id} started while running")
            if t < job.submit - TOL:
                bad(t, f"job {job.id} started before its submission at {job.submit:g}s")
            if not nodes or any(n not in size for n in nodes):
                bad(t, f"job {job.id} started on unknown nodes {nodes}")
                continue
            pools = {pool_of[n] for n in nodes}
            if len(pools) != 1:
                bad(t, f"job {job.id} spans pools {sorted(pools)}")
            cluster, gpu_type = next(iter(pools))
            if not job.allows(cluster, gpu_type):
                bad(t, f"job {job.id} placed on {cluster}/{gpu_type}, which it does not allow")
            node_size = size[nodes[0]]
            if job.gpus <= node_size:
                want_nodes, per_node = 1, job.gpus
            else:
                want_nodes, per_node = math.ceil(job.gpus / node_size), node_size
            if len(nodes) != want_nodes or len(set(nodes)) != len(nodes):
                bad(t, f"job {job.id} ({job.gpus} GPUs) got {len(nodes)} nodes, needs {want_nodes}")
            for n in nodes:
                for s, e in windows.get(n, ()):
                    if s - TOL <= t < e - TOL:
                        bad(t, f"job {job.id} started on {n}, drained from {s:g}s to {e:g}s")
                used[n] += per_node
                if used[n] > size[n]:
                    bad(t, f"node {n} oversubscribed: {used[n]} of {size[n]} GPUs")
            running[job.id] = {
                "start": t, "nodes": nodes, "per_node": per_node,
                "protected": detail == "protected",
                "unallocated": detail.startswith("unallocated"),
            }
            continue
        if kind in ("preempt", "finish"):
            r = running.pop(job.id, None)
            if r is None:
                bad(t, f"{kind} of job {job.id}, which is not running")
                continue
            for n in r["nodes"]:
                used[n] -= r["per_node"]
            ran = t - r["start"]
            done = progress.get(job.id, 0.0) + ran
            if kind == "finish":
                if job.duration is not None and abs(done - job.duration) > 1e-3:
                    bad(t, f"job {job.id} finished after {done:g}s of work, needs {job.duration:g}s")
                continue
            reason = detail
            if policy == "legacy":
                if r["protected"]:
                    bad(t, f"legacy preempted protected job {job.id} ({reason})")
            else:
                # Funded work run as unallocated (no budget headroom) has no contract.
                if not r["unallocated"] and job.min_runtime > 0 and ran < job.min_runtime - TOL:
                    bad(t, f"job {job.id} preempted after {ran:g}s, inside its minimum runtime "
                           f"of {job.min_runtime:g}s ({reason})")
                if (not r["unallocated"] and job.allocated and not job.resumable
                        and not reason.startswith("maintenance")):
                    bad(t, f"non-resumable job {job.id} preempted for {reason!r}")
            progress[job.id] = max(done - overhead, 0.0) if job.resumable else 0.0
    return errors


def check_result(scenario: Scenario, result: Any) -> list[str]:
    """:func:`check_events` on a :class:`~planner.simulator.SimulationResult`."""
    return check_events(scenario, result.policy, result.events)
