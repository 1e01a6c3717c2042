"""How loaded is a scenario? A clearly simplified estimator, not the simulator.

Replays a scenario's jobs through a **work-conserving FIFO-with-backfill model** of its
pools and reports:

- ``offered``: GPU-time asked for / (physical GPUs x the submission window);
- ``demand``: the time-averaged GPUs of submitted, unfinished jobs (running plus queued)
  divided by the physical GPUs, over the submission window;
- ``running``/``queued``: the two parts of that average, and ``busy`` the share of GPUs
  running work in the window;
- ``backlog_end``: queued GPUs at the end of the window / GPUs (a growing queue shows
  here), and ``drain_h``: hours after the window until the queue is empty.

The model: at every arrival or completion the queue is scanned in submission order and
each job that fits the free GPUs of one of its allowed pools starts there (the pool with
the most free GPUs). A job runs for its full duration and is never preempted. It
ignores node boundaries (gangs count GPUs only), drains, budgets and fair share, so it
measures the workload's pressure on the capacity, not any policy. Durations do not
depend on the GPU type.

Usage: ``python benchmarks/scenario_load.py [SCENARIO ...]`` (default: the bundled
ai2-like and philly-week). Prints one row per scenario.
"""

from __future__ import annotations

import heapq
import sys
import time
from dataclasses import dataclass
from pathlib import Path

# Runs as a script from a clone: make the project importable without installing it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from models import Scenario  # noqa: E402
from scenarios import load_scenario  # noqa: E402

DAY = 86400.0


@dataclass(frozen=True)
class LoadFigures:
    """What :func:`estimate_load` measures (ratios are of physical GPUs)."""

    jobs: int
    gpus: int
    window_h: float
    offered: float
    demand: float
    running: float
    queued: float
    busy: float
    backlog_end: float
    drain_h: float


def estimate_load(scenario: Scenario, window: float | None = None) -> LoadFigures:
    """Replay ``scenario``'s jobs through the FIFO-with-backfill model.

    Parameters
    ----------
    scenario
        A loaded scenario with jobs (every job must have a duration).
    window
        Seconds from 0 over which the averages are taken; by default the submission
        window rounded up to whole days.
    """
    jobs = sorted(scenario.jobs, key=lambda j: (j.submit, j.id))
    pools = scenario.pool_gpus()
    free = {str(p): n for p, n in pools.items()}
    capacity = sum(pools.values())
    allowed: list[tuple[str, ...]] = []
    by_cluster = {c.name: c for c in scenario.clusters}
    for j in jobs:
        allowed.append(tuple(
            str(p) for p in pools if scenario.job_fits(j, by_cluster[p.cluster], p.gpu_type)
        ))
    if window is None:
        last = max((j.submit for j in jobs), default=0.0)
        window = (int(last // DAY) + 1) * DAY

    queue: list[int] = []
    running: list[tuple[float, int, str]] = []  # (end, job index, pool)
    t = 0.0
    demand_gpus = 0  # running + queued
    running_gpus = 0
    area_demand = area_running = 0.0
    backlog_end = -1.0
    next_arrival = 0
    empty_at = 0.0

    def advance(to: float) -> None:
        nonlocal t, area_demand, area_running, backlog_end
        lo, hi = min(t, window), min(to, window)
        if hi > lo:
            area_demand += demand_gpus * (hi - lo)
            area_running += running_gpus * (hi - lo)
        if t <= window < to or (to == window and backlog_end < 0):
            backlog_end = (demand_gpus - running_gpus) / capacity
        t = to

    while next_arrival < len(jobs) or running:
        t_arr = jobs[next_arrival].submit if next_arrival < len(jobs) else float("inf")
        t_end = running[0][0] if running else float("inf")
        now = min(t_arr, t_end)
        advance(now)
        while running and running[0][0] <= now:
            _, k, pool = heapq.heappop(running)
            free[pool] += jobs[k].gpus
            demand_gpus -= jobs[k].gpus
            running_gpus -= jobs[k].gpus
        while next_arrival < len(jobs) and jobs[next_arrival].submit <= now:
            queue.append(next_arrival)
            demand_gpus += jobs[next_arrival].gpus
            next_arrival += 1
        # FIFO with backfill: every queued job that fits starts, in submission order.
        kept: list[int] = []
        for pos, k in enumerate(queue):
            if not any(free.values()):
                kept.extend(queue[pos:])
                break
            gpus = jobs[k].gpus
            best = None
            for name in allowed[k]:
                if free[name] >= gpus and (best is None or free[name] > free[best]):
                    best = name
            if best is None:
                kept.append(k)
                continue
            free[best] -= gpus
            running_gpus += gpus
            heapq.heappush(running, (now + float(jobs[k].duration or 0.0), k, best))
        if queue and not kept:
            empty_at = now  # the last time the queue empties is when it drained
        queue = kept
    if backlog_end < 0:
        backlog_end = 0.0
    offered = sum(j.gpus * (j.duration or 0.0) for j in jobs) / (capacity * window)
    return LoadFigures(
        jobs=len(jobs),
        gpus=capacity,
        window_h=window / 3600,
        offered=offered,
        demand=area_demand / (capacity * window),
        running=area_running / (capacity * window),
        queued=(area_demand - area_running) / (capacity * window),
        busy=area_running / (capacity * window),
        backlog_end=backlog_end,
        drain_h=max(0.0, empty_at - window) / 3600,
    )


def main(argv: list[str]) -> int:
    names = argv or ["ai2-like", "philly-week"]
    header = (
        f"{'scenario':<14}{'jobs':>7}{'GPUs':>6}{'window h':>9}{'offered':>8}{'demand':>8}"
        f"{'running':>8}{'queued':>8}{'backlog end':>12}{'drain h':>8}{'load s':>7}{'model s':>8}"
    )
    print("Time-averaged demand (running + queued GPUs) / GPUs, FIFO-with-backfill model")
    print(header)
    for name in names:
        t0 = time.perf_counter()
        s = load_scenario(name)
        t1 = time.perf_counter()
        f = estimate_load(s)
        t2 = time.perf_counter()
        print(
            f"{s.name:<14}{f.jobs:>7}{f.gpus:>6}{f.window_h:>9.0f}{f.offered:>8.2f}{f.demand:>8.2f}"
            f"{f.running:>8.2f}{f.queued:>8.2f}{f.backlog_end:>12.2f}{f.drain_h:>8.1f}"
            f"{t1 - t0:>7.1f}{t2 - t1:>8.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
