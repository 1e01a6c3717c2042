"""``legacy``: the institute's old scheduler, priorities plus protected GPUs.

Rules (``docs/metrics.md`` describes them for readers of the results):

- **Priority levels with inflation.** Each job gets a level 0 (low) to 3 (top), drawn
  from a seeded generator in the scenario's job order with probabilities
  :data:`LEVEL_WEIGHTS` (70% top), as the institute saw "every workload at the highest
  priority" in the end. The queue runs by level, then submit time (FIFO within a level);
  any job that fits idle GPUs starts (backfill).
- **Protected GPUs per team.** A team is a project; its limit is its static share of the
  cluster's GPUs (``effective_shares`` x total GPUs x ``protected_fraction``). Funded
  work (minimum runtime > 0) starts protected while the team is under its limit; the rest,
  and all unallocated work, starts preemptible on idle GPUs.
- **Preemption.** A job that would start protected may preempt preemptible jobs of its
  level or lower, before the idle GPUs go to backfill (the queue in priority order).
  Protected jobs are never preempted.
- **Maintenance.** Preemptible jobs on a drained node are preempted at once; protected jobs
  block the node until they end.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from models import effective_shares
from planner.scheduler.core import Scheduler, try_place
from planner.scheduler.queues import Shape, ShapeQueues, VictimIndex
from planner.scheduler.state import JobRun

LEVEL_WEIGHTS = (0.05, 0.10, 0.15, 0.70)
"""Probability of priority levels 0 (low) .. 3 (top)."""


class LegacyPolicy:
    """Priority levels with inflation, per-team protected GPUs, blocking maintenance."""

    name = "legacy"

    def __init__(self, seed: int = 0, protected_fraction: float = 1.0) -> None:
        self.seed = seed
        self.protected_fraction = protected_fraction
        self.queue = ShapeQueues(lambda r: (-r.level, r.job.submit))
        self.by_team = ShapeQueues(lambda r: (-r.level, r.job.submit))
        self.protected_used: dict[str, int] = {}
        self.limit: dict[str, int] = {}
        self.unprotected_gpus = 0

    def attach(self, engine: Scheduler) -> None:
        self.engine = engine
        rng = np.random.default_rng(self.seed)
        # One draw per job of the scenario, so a job's level does not depend on --days.
        jobs = engine.scenario.jobs
        levels = rng.choice(len(LEVEL_WEIGHTS), size=len(jobs), p=LEVEL_WEIGHTS)
        self.level_of = {j.id: int(lv) for j, lv in zip(jobs, levels, strict=True)}
        self.victims = VictimIndex(
            engine,
            level=lambda v: -math.inf if v.protected else -float(v.level),
            # Lowest level first, then the least GPU time lost.
            cost=lambda v: v.level * 1e12 + v.job.gpus * (engine.now - v.run_start),
        )
        total = sum(n.size for n in engine.cluster.nodes.values())
        shares = effective_shares(engine.scenario.org)
        for p in engine.scenario.projects:
            self.limit[p] = int(shares[p] * total * self.protected_fraction)
            self.protected_used[p] = 0

    def enqueue(self, run: JobRun) -> None:
        # A job the scenario does not list (adopted from a live cluster) gets the top
        # level: that is what everyone ended up asking for.
        run.level = self.level_of.get(run.job.id, len(LEVEL_WEIGHTS) - 1)
        self.queue.push(0, run)
        self.by_team.push(run.job.project, run)

    def on_wake(self, tag: Any, now: float) -> None:
        pass

    def on_contract_end(self, run: JobRun, now: float) -> None:
        pass  # the old system had no minimum-runtime contract

    def on_drain(self, node: str, now: float) -> None:
        e = self.engine
        for i in sorted(e.cluster.jobs_on[node]):
            run = e.runs[i]
            if run.status == "running" and not run.protected:
                self._preempt(run, "maintenance")

    def on_finish(self, run: JobRun) -> None:
        self._release(run)

    def _release(self, run: JobRun) -> None:
        """Give back the team's protected GPUs (or the preemptible count) of ``run``."""
        if run.protected:
            self.protected_used[run.job.project] -= run.job.gpus
            run.protected = False
        else:
            self.unprotected_gpus -= run.job.gpus

    def _preempt(self, run: JobRun, reason: str) -> None:
        self._release(run)
        self.engine.preempt(run, reason)

    def extra_summary(self) -> dict[str, Any]:
        return {}

    # -- scheduling --------------------------------------------------------------------

    def _would_protect(self, run: JobRun) -> bool:
        p = run.job.project
        return run.job.allocated and self.protected_used[p] + run.job.gpus <= self.limit[p]

    def _start(self, run: JobRun, pool: Any, nodes: tuple[str, ...]) -> None:
        protect = self._would_protect(run)
        if protect:
            self.protected_used[run.job.project] += run.job.gpus
        else:
            self.unprotected_gpus += run.job.gpus
        self.engine.start(run, pool, nodes, protected=protect,
                          detail="protected" if protect else "preemptible")

    def schedule(self, now: float, dirty: bool, new: list[JobRun]) -> None:
        e = self.engine
        # 1. Jobs that would start protected and find no idle hole preempt preemptible
        #    work of their level or lower, before the idle GPUs are handed out: a job
        #    that backfilled a moment ago would otherwise be the cheapest victim (no GPU
        #    time lost yet), started and preempted at one instant. On philly-week that
        #    was 893 of 1,721 preemptions.
        if self.unprotected_gpus > 0 and (dirty or new):
            self._preempt_pass()
        # 2. Backfill idle GPUs in level order (free GPUs only shrink in this phase, so a
        #    shape that failed once fails for the rest of the pass).
        if e.cluster.total_free > 0:
            dead: set[Shape] = set()
            for shape, run in self.queue.iter_group(e, 0, dead):
                placed = try_place(e, run)
                if placed is not None:
                    self._start(run, *placed)
                else:
                    dead.add(shape)

    def _preempt_pass(self) -> None:
        """Per team (protection depends on the team's limit), its queued jobs that would
        start protected and fit no idle hole take the room of preemptible work."""
        e = self.engine
        for project in e.scenario.projects:
            if self.protected_used[project] >= self.limit[project]:
                continue
            dead: set[Shape] = set()
            for shape, run in self.by_team.iter_group(e, project, dead):
                if self.unprotected_gpus == 0:
                    return
                if not self._would_protect(run) or try_place(e, run) is not None:
                    # Over the limit, or the backfill in level order places it.
                    dead.add(shape)
                    continue
                # Eligible: preemptible jobs of the requester's level or lower.
                found = self.victims.find(run, -run.level - 0.5)
                placed = None
                if found is not None:
                    for v in found[1]:
                        self._preempt(v, f"priority: {run.job.id}")
                    placed = try_place(e, run)
                if placed is not None:
                    self._start(run, *placed)
                else:
                    dead.add(shape)
