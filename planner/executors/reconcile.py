"""Turn one slice of a plan into the steps that make an observed cluster match it.

This is the part every executor shares, and the reason ``apply`` is idempotent: steps
come from comparing the plan with what the cluster *reports now*, never from what the
executor did before. A job already running where the slice wants it yields no step; a
crash between two steps is repaired by the next apply.

The rules, for the managed jobs of the cluster:

- a job assigned in the slice that is held (or released but pinned elsewhere) is
  started: pinned to the planned nodes, then released;
- a job assigned in the slice that already runs on the planned nodes is continued
  (no step); one suspended on them is resumed in place;
- a job not assigned in the slice that runs past its minimum runtime and is resumable
  is preempted (requeued and left held); so is a non-resumable one the plan's actions
  say to preempt (moved off for maintenance: it restarts from scratch, as its contract
  allows); one that waits released is held again;
- a job inside its minimum runtime is never touched, whatever the plan says;
- a start on a drained or unknown node is refused.
"""

from __future__ import annotations

from typing import Literal

from models import Plan
from models.base import Frozen
from planner.executors.state import ActionResult, ClusterState, ObservedJob


class Step(Frozen):
    """One change an executor must make to its cluster."""

    job: str
    native_id: str
    action: Literal["start", "resume", "preempt", "hold"]
    nodes: tuple[str, ...] = ()
    # The job waits released, pinned elsewhere: hold it before re-pinning.
    rehold: bool = False
    # The job is suspended on its planned nodes: resume it where it is.
    in_place: bool = False


def reconcile(
    state: ClusterState, plan: Plan, slice_index: int
) -> tuple[tuple[Step, ...], tuple[ActionResult, ...]]:
    """Steps that bring ``state`` to slice ``slice_index`` of ``plan``, and no-op results.

    Parameters
    ----------
    state
        What the cluster reports now (its ``at`` is the moment contracts are judged at).
    plan
        The epoch's plan.
    slice_index
        Which slice to apply (0-based).

    Returns
    -------
    steps, results
        The steps to carry out (preemptions and holds first, so starts find their nodes
        freed), and a result for every job that needs no step or must not get one
        (continued, protected by its contract, refused).

    Raises
    ------
    IndexError
        When the plan has no slice ``slice_index``.
    """
    if not 0 <= slice_index < len(plan.slices):
        raise IndexError(f"plan has {len(plan.slices)} slices, no slice {slice_index}")
    now = state.at
    chosen = plan.slices[slice_index]
    planned = {a.job: a.nodes for a in chosen.assignments}
    resumed = {a.job for a in plan.actions if a.action == "resume"}
    restart = {a.job for a in plan.actions if a.action == "preempt"}
    stops: list[Step] = []
    starts: list[Step] = []
    results: list[ActionResult] = []

    for name, nodes in planned.items():
        job = state.job(name)
        if job is None:
            results.append(ActionResult(job=name, action="start", ok=False, nodes=nodes,
                                        detail="no such job on the cluster"))
            continue
        verb: Literal["start", "resume"] = (
            "resume" if name in resumed or job.restarts > 0 else "start"
        )
        if job.phase == "running":
            if set(job.nodes) == set(nodes):
                results.append(_noop(job, "continue", "runs on its planned nodes"))
            elif _may_stop(job, now, restart) and not _node_refusal(state, nodes):
                # Moved: the scheduler preempted it and restarted it elsewhere at once
                # (it pays the restart). Requeue it, then start it on its new nodes.
                stops.append(Step(job=name, native_id=job.native_id, action="preempt",
                                  nodes=job.nodes))
                starts.append(Step(job=name, native_id=job.native_id, action="resume",
                                   nodes=nodes))
            else:
                # Inside its contract the cluster keeps it where it is, whatever the plan.
                results.append(ActionResult(
                    job=name, action="continue", ok=False, nodes=job.nodes,
                    native_id=job.native_id,
                    detail=f"runs on {','.join(job.nodes)}, plan says {','.join(nodes)}",
                ))
            continue
        if job.phase == "suspended":
            if set(job.nodes) == set(nodes):
                starts.append(Step(job=name, native_id=job.native_id, action="resume",
                                   nodes=nodes, in_place=True))
            else:
                results.append(ActionResult(
                    job=name, action="resume", ok=False, nodes=job.nodes, native_id=job.native_id,
                    detail=f"suspended on {','.join(job.nodes)}, plan says {','.join(nodes)}",
                ))
            continue
        if job.phase == "finished":
            results.append(_noop(job, "continue", "already finished"))
            continue
        if job.phase == "completing":
            results.append(ActionResult(job=name, action=verb, ok=False, nodes=nodes,
                                        native_id=job.native_id,
                                        detail="still stopping; the next apply starts it"))
            continue
        refusal = _node_refusal(state, nodes)
        if refusal:
            results.append(ActionResult(job=name, action=verb, ok=False, nodes=nodes,
                                        native_id=job.native_id, detail=refusal))
            continue
        if job.phase == "pending" and set(job.pinned) == set(nodes):
            results.append(_noop(job, verb, "released, waiting for its planned nodes"))
            continue
        starts.append(Step(job=name, native_id=job.native_id, action=verb, nodes=nodes,
                           rehold=job.phase == "pending"))

    for job in state.jobs:
        if not job.managed or job.job in planned:
            continue
        if job.phase == "pending":
            stops.append(Step(job=job.job, native_id=job.native_id, action="hold"))
        elif job.phase == "running":
            if job.protected_at(now):
                end = job.contract_end() or now
                why = ("its minimum runtime is unknown" if end == float("inf")
                       else f"inside its minimum runtime for {end - now:.0f}s more")
                results.append(_noop(job, "protect", why))
            elif not job.resumable and job.job not in restart:
                results.append(ActionResult(
                    job=job.job, action="preempt", ok=False, nodes=job.nodes,
                    native_id=job.native_id,
                    detail="not resumable: left running (only resumable work is requeued)",
                ))
            else:
                stops.append(Step(job=job.job, native_id=job.native_id, action="preempt",
                                  nodes=job.nodes))
    return tuple(stops + starts), tuple(results)


def _may_stop(job: ObservedJob, now: float, restart: set[str]) -> bool:
    """Whether a running job may be requeued now: past its minimum runtime, and
    resumable or named in the plan's preempt actions."""
    return not job.protected_at(now) and (job.resumable or job.job in restart)


def _noop(job: ObservedJob, action: Literal["continue", "protect", "start", "resume"],
          detail: str) -> ActionResult:
    return ActionResult(job=job.job, action=action, ok=True, changed=False,
                        nodes=job.nodes or job.pinned, native_id=job.native_id, detail=detail)


def _node_refusal(state: ClusterState, nodes: tuple[str, ...]) -> str:
    for name in nodes:
        node = state.node(name)
        if node is None:
            return f"unknown node {name}"
        if node.drained:
            return f"node {name} is drained" + (f" ({node.reason})" if node.reason else "")
    return ""
