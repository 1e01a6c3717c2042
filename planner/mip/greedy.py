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
    """Every running job continues as long as its work and any drain of its nodes allow.

    Past its project's headroom it runs unallocated (:func:`charge_runs`).
    """
    return {r.id: r.may for r in epoch.running}


def greedy_plan(epoch: Epoch, greedy: Greedy, solver: SolverInfo) -> Plan:
    """The :class:`Plan` of ``greedy``, with pending reasons, flagged by ``solver``."""
    pending = pending_reasons(epoch, greedy.runs, set(), greedy.board)
    return build_plan(epoch, greedy.runs, pending, solver)
