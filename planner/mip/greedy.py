"""The greedy feasible plan: the fallback when the solver has no answer, and its warm start.

Running jobs continue as long as their work and any drain of their nodes allow; then
waiting jobs start wherever their gang fits, the project furthest below its owed share
first (:func:`planner.mip.assemble.fill_gaps`). It honours every constraint the MIP has,
so it is always a valid plan, only a less fair one.
"""

from __future__ import annotations

from dataclasses import dataclass

from models import Plan, SolverInfo
from planner.mip.assemble import Board, Run, build_plan, place_runs
from planner.mip.epoch import Epoch
from planner.mip.explain import pending_reasons


@dataclass
class Greedy:
    """The greedy runs and the board they leave."""

    runs: list[Run]
    board: Board


def greedy_runs(epoch: Epoch, previous: Plan | None) -> Greedy:
    """Place the greedy plan's runs."""
    runs, _, board = place_runs(epoch, running_ends(epoch), [], previous, fill=True)
    return Greedy(runs, board)


def running_ends(epoch: Epoch) -> dict[str, int]:
    """How long each running job continues: as long as it may, within its budget.

    A charged job past its contract stops at the first boundary where its project's
    headroom (after every job's contracted slices) runs out, highest priority served
    first; unallocated work continues.
    """
    left = dict(epoch.headroom_q)
    ends: dict[str, int] = {}
    optional = []
    for r in epoch.running:
        must = min(r.must, r.may)
        ends[r.id] = must
        if r.state.charged:
            pool = epoch.pools[r.pool]
            job = r.state.job
            left[job.project] = left.get(job.project, 0) - must * epoch.charge_q(
                job.gpus, pool, job.urgent
            )
        if r.may > must:
            optional.append(r)
    optional.sort(key=lambda r: (not r.state.job.urgent, -r.state.job.priority, r.id))
    for r in optional:
        extra = r.may - ends[r.id]
        if r.state.charged:
            job = r.state.job
            cost = epoch.charge_q(job.gpus, epoch.pools[r.pool], job.urgent)
            extra = min(extra, max(left.get(job.project, 0), 0) // cost)
            left[job.project] = left.get(job.project, 0) - extra * cost
        ends[r.id] += extra
    return ends


def greedy_plan(epoch: Epoch, greedy: Greedy, solver: SolverInfo) -> Plan:
    """The :class:`Plan` of ``greedy``, with pending reasons, flagged by ``solver``."""
    pending = pending_reasons(epoch, greedy.runs, set(), greedy.board)
    return build_plan(epoch, greedy.runs, pending, solver)
