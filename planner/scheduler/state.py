"""Mutable simulation state: jobs as they run, nodes and their free GPUs.

Everything here is updated incrementally (per-node free counts, per-pool histograms of
free GPUs), so one decision costs O(nodes touched), never a scan of the cluster.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from models import Job, Pool, Scenario

DEBUG_MAX_GPUS = 8
DEBUG_MAX_MIN_RUNTIME = 15 * 60.0
LARGE_MIN_GPUS = 64

WAIT_CLASSES = ("debug", "large", "batch", "all")


def wait_class(job: Job) -> str:
    """The wait class of ``job`` by its shape (``docs/metrics.md``).

    ``debug``: 8 GPUs or fewer and a minimum runtime of 15 min or less; ``large``: 64 GPUs
    or more; ``batch``: the rest. The shape decides, not the job's declared ``kind``, so
    every policy and scenario is measured the same way.
    """
    if job.gpus <= DEBUG_MAX_GPUS and job.min_runtime <= DEBUG_MAX_MIN_RUNTIME:
        return "debug"
    if job.gpus >= LARGE_MIN_GPUS:
        return "large"
    return "batch"


@dataclass(slots=True)
class JobRun:
    """One job's life in the simulation.

    ``progress`` is seconds of useful work kept so far (excluding the current run);
    ``run_start`` is when the current run began (the contract counts from there).
    """

    job: Job
    index: int
    cls: str
    status: str = "future"  # future -> queued -> running -> (queued ...) -> done
    progress: float = 0.0
    run_start: float = math.nan
    pool: Pool | None = None
    nodes: tuple[str, ...] = ()
    per_node: int = 0
    rate: float = 1.0
    charged: bool = True
    protected: bool = False
    level: int = 0
    first_start: float = math.nan
    queued_at: float = math.nan  # when it first joined the queue (its arrival)
    end: float = math.nan
    restarts: int = 0
    preemptions: int = 0
    lost_h100_s: float = 0.0
    h100_demand: float = 0.0
    token: int = 0  # bumps on every start and stop, so stale completion events are ignored
    # Whether its GPUs are in ``Scheduler.preemptible_gpus`` (its contract passed while
    # it ran), so that its stop takes out exactly what was put in.
    counted: bool = False

    @property
    def remaining(self) -> float:
        """Wall seconds the job needs if (re)started now; ``inf`` when its duration is
        not known (a job adopted from a live cluster)."""
        if self.job.duration is None:
            return math.inf
        return self.job.duration - self.progress

    @property
    def contract_end(self) -> float:
        return self.run_start + self.job.min_runtime

    def done_work(self, now: float) -> float:
        """Useful work (seconds) done by ``now``, counting the current run."""
        if self.status != "running":
            return self.progress
        return self.progress + (now - self.run_start)


@dataclass(slots=True)
class NodeInfo:
    """A node's fixed facts: pool, size (GPUs) and H100-equivalent rate."""

    name: str
    pool: Pool
    size: int
    rate: float


@dataclass
class PoolState:
    """Free GPUs of the pool's nodes that may take new work, kept incrementally."""

    pool: Pool
    open_free: dict[str, int] = field(default_factory=dict)  # non-drained nodes with free > 0
    hist: list[int] = field(default_factory=list)  # hist[f]: non-drained nodes with f free GPUs
    size: dict[str, int] = field(default_factory=dict)
    uniform: bool = True
    free_gpus: int = 0  # free GPUs of its non-drained nodes

    def can_fit(self, gpus: int, max_size: int) -> bool:
        """Whether ``place_gang`` may find a hole: exact for pools of one node size."""
        if gpus <= max_size:
            return any(self.hist[gpus:])
        if not self.uniform:
            return True  # mixed node sizes: let place_gang decide
        need = math.ceil(gpus / max_size)
        return self.hist[max_size] >= need


class ClusterState:
    """Nodes, their free GPUs, drains and the jobs on each node."""

    def __init__(self, scenario: Scenario) -> None:
        self.nodes: dict[str, NodeInfo] = {}
        self.free: dict[str, int] = {}
        self.drained: set[str] = set()
        self.jobs_on: dict[str, set[int]] = {}
        self.pools: dict[Pool, PoolState] = {}
        self.max_size: dict[Pool, int] = {}
        for node in scenario.nodes:
            info = NodeInfo(node.name, node.pool, node.gpus, scenario.rate(node.gpu_type))
            self.nodes[node.name] = info
            self.free[node.name] = node.gpus
            self.jobs_on[node.name] = set()
            ps = self.pools.setdefault(node.pool, PoolState(node.pool))
            ps.size[node.name] = node.gpus
            self.max_size[node.pool] = max(self.max_size.get(node.pool, 0), node.gpus)
        for pool, ps in self.pools.items():
            ps.uniform = len(set(ps.size.values())) == 1
            ps.hist = [0] * (self.max_size[pool] + 1)
            for name, size in ps.size.items():
                ps.hist[size] += 1
                ps.open_free[name] = size
                ps.free_gpus += size
        # (gpu types, clusters) of a job -> its allowed pools, for candidate_pools
        self._allowed: dict[tuple[Any, Any], list[tuple[Pool, PoolState, int]]] = {}
        self._uniform: dict[tuple[Any, Any], bool] = {}
        # Bumps whenever a node's free GPUs or drained state change: a greedy pass that
        # changed nothing changes nothing again until it moves (``fairshare``'s passes).
        self.version = 0
        # Bumps only when GPUs come back (a job's GPUs given back, a drain ended): taking
        # GPUs never opens a hole, so a placement that found none finds none again until
        # this moves, however many starts come between.
        self.grown = 0
        # (gpu types, clusters) -> (grown, gpus): at that count a gang of that many GPUs
        # found no hole in the pools it may use (``planner.scheduler.try_place``).
        self.no_hole: dict[tuple[Any, Any], tuple[int, int]] = {}
        self.capacity_h100 = scenario.capacity_h100()  # drained nodes included
        self.available_gpus = sum(n.size for n in self.nodes.values())
        self.available_h100 = sum(n.size * n.rate for n in self.nodes.values())
        self.total_free = self.available_gpus

    def allowed_pools(self, job: Job) -> list[tuple[Pool, PoolState, int]]:
        """The pools ``job`` may run on, in cluster order, with their largest node size
        (computed once per job shape: the pools never change)."""
        key = (job.gpu_types, job.clusters)
        found = self._allowed.get(key)
        if found is None:
            found = self._allowed[key] = [
                (pool, ps, self.max_size[pool]) for pool, ps in self.pools.items()
                if job.allows(pool.cluster, pool.gpu_type)
            ]
        return found

    def uniform_pools(self, job: Job) -> bool:
        """Whether every pool ``job`` may run on has one node size: there
        :meth:`PoolState.can_fit` is exact, and a gang that finds no hole leaves none for
        a bigger one."""
        key = (job.gpu_types, job.clusters)
        found = self._uniform.get(key)
        if found is None:
            found = self._uniform[key] = all(ps.uniform for _, ps, _ in self.allowed_pools(job))
        return found

    # -- incremental updates --------------------------------------------------------

    def _set_free(self, name: str, value: int) -> None:
        self.version += 1
        old = self.free[name]
        if value > old:
            self.grown += 1
        self.free[name] = value
        if name in self.drained:
            return
        ps = self.pools[self.nodes[name].pool]
        ps.hist[old] -= 1
        ps.hist[value] += 1
        self.total_free += value - old
        ps.free_gpus += value - old
        if value > 0:
            ps.open_free[name] = value
        else:
            ps.open_free.pop(name, None)

    def take(self, names: tuple[str, ...], per_node: int, job_index: int) -> None:
        """Give ``per_node`` GPUs of each node to job ``job_index``; refuses to oversubscribe."""
        for name in names:
            if self.free[name] < per_node:
                raise RuntimeError(f"node {name} oversubscribed by job #{job_index}")
            self._set_free(name, self.free[name] - per_node)
            self.jobs_on[name].add(job_index)

    def give(self, names: tuple[str, ...], per_node: int, job_index: int) -> None:
        """Return the job's GPUs to its nodes."""
        for name in names:
            self._set_free(name, self.free[name] + per_node)
            self.jobs_on[name].discard(job_index)

    def drain(self, name: str) -> None:
        """Stop ``name`` taking new work (its running jobs stay until moved off)."""
        if name in self.drained:
            return
        self.version += 1
        info = self.nodes[name]
        ps = self.pools[info.pool]
        f = self.free[name]
        ps.hist[f] -= 1
        ps.open_free.pop(name, None)
        self.total_free -= f
        ps.free_gpus -= f
        self.drained.add(name)
        self.available_gpus -= info.size
        self.available_h100 -= info.size * info.rate

    def undrain(self, name: str) -> None:
        """Let ``name`` take new work again (its maintenance window ended)."""
        if name not in self.drained:
            return
        self.version += 1
        self.grown += 1
        self.drained.discard(name)
        info = self.nodes[name]
        ps = self.pools[info.pool]
        f = self.free[name]
        ps.hist[f] += 1
        if f > 0:
            ps.open_free[name] = f
        self.total_free += f
        ps.free_gpus += f
        self.available_gpus += info.size
        self.available_h100 += info.size * info.rate
