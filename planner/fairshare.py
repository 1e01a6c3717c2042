"""Hierarchical fair share: what each project is owed, and where it stands.

This is the one implementation of the owed allocation and of the standings that the
planner, the simulator and the app all use. Amounts are H100-equivalent GPUs (owed) and
H100-equivalent GPU-hours (standings); see ``docs/budgets.md`` for the rules.

Owed allocation (:func:`water_fill`)
    A unit's allotment splits among its children in proportion to their ``share``; a
    child whose (subtree) demand is below its slice gets its demand and the excess goes
    to its siblings; a unit whose whole subtree wants less than its slice passes the
    excess up, to its own siblings. At every level this is weighted max-min fairness
    with each child capped at its subtree's demand, computed exactly (sort by demand per
    unit of share, fill in one pass), so the whole tree costs O(n log n).

Demand
    A job's demand is its ``gpus`` times :func:`job_rate`, the rate of the cheapest GPU
    type it may run on. Only funded work (``min_runtime > 0``) is owed anything: free
    work runs on idle GPUs and is never charged, so it creates no claim.
"""

from __future__ import annotations

import bisect
import math
import weakref
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from models import (
    GpuType,
    Job,
    Node,
    OrgUnit,
    Policy,
    ProjectStanding,
    Scenario,
    Snapshot,
    walk,
    with_shares,
)
from planner.budgets import budget_rates, headroom_gpu_h
from planner.ledger import Ledger, Totals

MAX_RATIO = 1000.0
"""Cap of the fair-share ratio: a project that had 1000x what it was owed is "far ahead".

It keeps the ratio finite (JSON has no infinity) when a project was charged while owed
nothing in the window.
"""

_T = TypeVar("_T")


# -- water-filling ----------------------------------------------------------------------


def water_fill(
    org: tuple[OrgUnit, ...], demand: Mapping[str, float], capacity: float
) -> dict[str, float]:
    """Each project's owed H100-equivalent GPUs under hierarchical water-filling.

    Parameters
    ----------
    org
        The org tree (top-level units); leaves are projects named by path.
    demand
        H100-equivalent GPUs each project could use now. Projects left out want 0.
    capacity
        H100-equivalent GPUs to share (``Scenario.capacity_h100()``).

    Returns
    -------
    dict[str, float]
        Every project of ``org`` (tree order) to its owed GPUs. The values sum to
        ``min(capacity, total demand)`` and none exceeds its project's demand.

    Raises
    ------
    ValueError
        Negative or non-finite demand, negative or NaN capacity (an infinite one owes
        every project its demand), or a demand for a path that is not a project of
        ``org``.
    """
    if not (capacity >= 0) or math.isnan(capacity):
        raise ValueError(f"capacity must be a non-negative number, got {capacity!r}")
    # The scheduler asks twice per charge point with the same inputs (owed hours, then
    # standings); the answer is a pure function of them.
    last = _last_fill.get("call")
    if (last is not None and last[0] is org and last[2] == capacity and type(demand) is dict
            and last[1] == demand):
        return dict(last[3])
    owed = _water_fill(org, demand, capacity)
    _last_fill["call"] = (org, dict(demand), capacity, dict(owed))
    return owed


_last_fill: dict[str, tuple[tuple[OrgUnit, ...], dict[str, float], float, dict[str, float]]] = {}
"""The last :func:`water_fill` call's org (by identity), demand, capacity and answer."""


def _water_fill(
    org: tuple[OrgUnit, ...], demand: Mapping[str, float], capacity: float
) -> dict[str, float]:
    leaves: dict[str, float] = {}
    roots = _demand_tree(org, "", demand, leaves)
    unknown = sorted(p for p in demand if p not in leaves)
    if unknown:
        raise ValueError(
            f"demand for {', '.join(map(repr, unknown[:5]))}"
            f"{' and more' if len(unknown) > 5 else ''}: not a project of the org tree"
        )
    owed = dict.fromkeys(leaves, 0.0)
    total = sum(node[2] for node in roots)
    _allocate(roots, min(capacity, total), owed)
    return owed


# A node of the demand tree: (path, share, subtree demand, children or None for a project).
_Node = tuple[str, float, float, "list[_Node] | None"]


def _demand_tree(
    units: tuple[OrgUnit, ...], prefix: str, demand: Mapping[str, float], leaves: dict[str, float]
) -> list[_Node]:
    nodes: list[_Node] = []
    for unit in units:
        path = prefix + unit.name
        if unit.children:
            children = _demand_tree(unit.children, path + "/", demand, leaves)
            nodes.append((path, unit.share, sum(c[2] for c in children), children))
        else:
            d = float(demand.get(path, 0.0))
            if not (d >= 0.0) or d == math.inf:
                raise ValueError(f"demand of {path!r} must be a finite number >= 0, got {d!r}")
            leaves[path] = d
            nodes.append((path, unit.share, d, None))
    return nodes


def _allocate(nodes: list[_Node], amount: float, owed: dict[str, float]) -> None:
    """Split ``amount`` among sibling ``nodes`` (weighted max-min, capped at demand)."""
    shares = _max_min([n[1] for n in nodes], [n[2] for n in nodes], amount)
    for node, got in zip(nodes, shares, strict=True):
        if node[3] is None:
            owed[node[0]] = got
        elif got > 0.0:
            _allocate(node[3], got, owed)


def _max_min(weights: list[float], caps: list[float], amount: float) -> list[float]:
    """Weighted max-min fair split of ``amount`` with per-child caps, in one sorted pass.

    Children in increasing order of cap per unit of weight: while the current child's
    cap is below its weighted slice of what is left, it is saturated and leaves the
    rest to the others; the first child that is not saturated fixes the water level for
    all the remaining ones (they have larger caps per weight).
    """
    total_cap = sum(caps)
    if amount >= total_cap:
        return list(caps)
    n = len(caps)
    out = [0.0] * n
    if amount <= 0.0:
        return out
    order = sorted(range(n), key=lambda i: caps[i] / weights[i])
    remaining = amount
    weight_left = sum(weights)
    for k, i in enumerate(order):
        if caps[i] * weight_left <= remaining * weights[i]:
            out[i] = caps[i]
            remaining = max(remaining - caps[i], 0.0)
            weight_left -= weights[i]
            continue
        level = remaining / weight_left
        for j in order[k:]:
            out[j] = level * weights[j]
        break
    return out


# -- demand, rates and the org in force ---------------------------------------------------


class _IdentityCache:
    """Derived data per live object, keyed by identity (hashing a big scenario is slow).

    Entries go away with their object, so a recycled ``id`` never returns stale data.
    """

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref[Any], Any]] = {}

    def get(self, obj: Any, build: Callable[[Any], _T]) -> _T:
        key = id(obj)
        hit = self._entries.get(key)
        if hit is not None and hit[0]() is obj:
            value: _T = hit[1]
            return value
        value = build(obj)
        entries = self._entries

        def _drop(ref: weakref.ref[Any], key: int = key) -> None:
            if key in entries and entries[key][0] is ref:
                del entries[key]

        self._entries[key] = (weakref.ref(obj, _drop), value)
        return value


_pool_cache = _IdentityCache()
_demand_cache = _IdentityCache()
_history_cache = _IdentityCache()
_rate_cache = _IdentityCache()


def _new_dict(_: Any) -> dict[Any, Any]:
    return {}

# (cluster, gpu type) -> {GPUs per node: number of such nodes}
_PoolShapes = dict[tuple[str, str], dict[int, int]]


def _pool_shapes(nodes: tuple[Node, ...]) -> _PoolShapes:
    shapes: _PoolShapes = {}
    for node in nodes:
        sizes = shapes.setdefault((node.cluster, node.gpu_type), {})
        sizes[node.gpus] = sizes.get(node.gpus, 0) + 1
    return shapes


def _gang_fits(gpus: int, sizes: dict[int, int]) -> bool:
    # As planner.placement: a gang that fits one node needs one; larger gangs take
    # whole nodes of one size.
    return any(gpus <= size or -(-gpus // size) <= count for size, count in sizes.items())


def job_rate(source: Scenario | Snapshot | Mapping[str, GpuType], job: Job) -> float:
    """The H100-equivalent rate at which a job's demand counts: its cheapest allowed type.

    Parameters
    ----------
    source
        A scenario or snapshot (the job's allowed pools are those whose nodes can hold
        its gang) or a bare ``{gpu type: GpuType}`` mapping (the job's ``gpu_types``, or
        every type when it names none).
    job
        The job.

    Returns
    -------
    float
        The smallest rate among the GPU types the job may run on. Demand (and so what
        it is owed) counts ``job.gpus * job_rate(...)``: a job that could run on H100s
        claims H100 time even if it ends up on B200s, whose extra rate is then charged
        when it runs there (``docs/budgets.md``, exchange rates).
    """
    gpu_types: Mapping[str, GpuType]
    if isinstance(source, Scenario | Snapshot):
        # One answer per job shape and source (a scenario's queue has a few dozen).
        known: dict[tuple[Any, ...], float] = _rate_cache.get(source, _new_dict)
        shape = (job.gpus, job.gpu_types, job.clusters)
        cached = known.get(shape)
        if cached is not None:
            return cached
        gpu_types = source.gpu_types
        shapes = _pool_cache.get(source, _shapes_of)
        rates = [
            gpu_types[t].rate
            for (cluster, t), sizes in shapes.items()
            if job.allows(cluster, t) and _gang_fits(job.gpus, sizes) and t in gpu_types
        ]
        if rates:
            rate: float = min(rates)
            known[shape] = rate
            return rate
    else:
        gpu_types = source
    allowed = job.gpu_types if job.gpu_types is not None else tuple(gpu_types)
    rates = [gpu_types[t].rate for t in allowed if t in gpu_types]
    if not rates:
        raise ValueError(f"job {job.id!r}: none of its GPU types {allowed} has a known rate")
    return min(rates)


def _shapes_of(source: Scenario | Snapshot) -> _PoolShapes:
    if isinstance(source, Scenario):
        return _pool_shapes(source.nodes)
    return _pool_shapes(tuple(state.node for state in source.nodes))


class _Demand:
    """A scenario's funded jobs as arrays, so demand at any time is one vector pass."""

    def __init__(self, scenario: Scenario) -> None:
        self.projects = scenario.projects
        index = {p: i for i, p in enumerate(self.projects)}
        funded = [j for j in scenario.jobs if j.allocated]
        self.submit = np.array([j.submit for j in funded], dtype=float)
        # Live jobs (duration unknown) want their GPUs until they are done.
        self.end = np.array(
            [j.submit + j.duration if j.duration is not None else math.inf for j in funded],
            dtype=float,
        )
        self.project = np.array([index[j.project] for j in funded], dtype=np.intp)
        self.h100 = np.array([j.gpus * job_rate(scenario, j) for j in funded], dtype=float)

    def at(self, t: float) -> dict[str, float]:
        live: npt.NDArray[np.bool_] = (self.submit <= t) & (self.end > t)
        sums = np.bincount(self.project[live], weights=self.h100[live], minlength=len(self.projects))
        return {p: float(v) for p, v in zip(self.projects, sums, strict=True) if v > 0.0}


def demand_at(scenario: Scenario, t: float) -> dict[str, float]:
    """H100-equivalent GPUs each project wants at ``t`` (projects wanting none left out).

    A funded job (``min_runtime > 0``) counts from its submission until it would have
    finished had it run straight away (``submit <= t < submit + duration``; a job with
    no known duration counts from submission on), at ``gpus * job_rate``.
    """
    demand: _Demand = _demand_cache.get(scenario, _Demand)
    return demand.at(t)


def org_history(scenario: Scenario) -> tuple[tuple[float, tuple[OrgUnit, ...]], ...]:
    """The org tree over time: ``(effective from, org)`` pairs, oldest first.

    The first entry is the scenario's own org, from time 0. Each budget revision
    replaces the shares it names from its ``at`` on and keeps every other share as it
    was (revisions accumulate); revisions with the same ``at`` apply in file order.
    """
    history: tuple[tuple[float, tuple[OrgUnit, ...]], ...] = _history_cache.get(
        scenario, _build_history
    )
    return history


def _build_history(scenario: Scenario) -> tuple[tuple[float, tuple[OrgUnit, ...]], ...]:
    out: list[tuple[float, tuple[OrgUnit, ...]]] = [(0.0, scenario.org)]
    shares: dict[str, float] = {}
    for rev in sorted(scenario.budget_revisions, key=lambda r: r.at):
        shares.update(rev.shares)
        entry = (max(rev.at, 0.0), with_shares(scenario.org, shares))
        # A revision at or before the start (or at the time of the previous one)
        # replaces that entry instead of opening a period of zero length.
        if out[-1][0] >= entry[0]:
            out[-1] = entry
        else:
            out.append(entry)
    return tuple(out)


def org_at(scenario: Scenario, t: float) -> tuple[OrgUnit, ...]:
    """The org tree in force at ``t``: every budget revision with ``at <= t`` applied."""
    history = org_history(scenario)
    starts = [start for start, _ in history]
    i = bisect.bisect_right(starts, t) - 1
    return history[max(i, 0)][1]


def owed_at(scenario: Scenario, t: float) -> dict[str, float]:
    """Each project's owed H100-equivalent GPUs at ``t``.

    :func:`water_fill` of the org in force at ``t`` (:func:`org_at`), the demand at
    ``t`` (:func:`demand_at`) and the scenario's whole capacity
    (``Scenario.capacity_h100()``, before maintenance drains).
    """
    return water_fill(org_at(scenario, t), demand_at(scenario, t), scenario.capacity_h100())


# -- standings ---------------------------------------------------------------------------


def fair_share_ratio(charged_gpu_h: float, owed_gpu_h: float) -> float:
    """Charged over owed GPU-hours: below 1 a project is behind, above 1 ahead.

    A project owed nothing in the window has ratio 0 when it was charged nothing too
    (its new work is not behind anyone's, so it may start first), and otherwise is
    "far ahead"; every ratio is capped at :data:`MAX_RATIO`.
    """
    if owed_gpu_h > 0.0:
        return min(charged_gpu_h / owed_gpu_h, MAX_RATIO)
    return 0.0 if charged_gpu_h <= 0.0 else MAX_RATIO


def window_ratios(ledger: Ledger | None, now: float, policy: Policy) -> dict[str, float]:
    """Each project's fair-share ratio at ``now``: the ``ratio`` of :func:`standings`
    alone, without the owed GPUs, deficit and headroom (the greedy policies read only
    the ratio, at every charge point). Projects with no record in the window are left
    out: their ratio is 0, as :func:`standings` gives them.
    """
    if ledger is None:
        return {}
    past = ledger.window_totals(now - policy.lookback, now)
    return {p: fair_share_ratio(t.charged_gpu_h, t.owed_gpu_h) for p, t in past.items()}


def standings(
    org: tuple[OrgUnit, ...],
    demand: Mapping[str, float],
    capacity: float,
    ledger: Ledger | None,
    now: float,
    policy: Policy,
    *,
    budget_capacity: float | None = None,
) -> dict[str, ProjectStanding]:
    """Every project's fair-share standing at ``now``.

    Parameters
    ----------
    org
        The org in force at ``now`` (:func:`org_at`); its shares set the budgets.
    demand
        H100-equivalent GPUs each project wants now (:func:`demand_at`).
    capacity
        H100-equivalent GPUs to share.
    ledger
        The usage history; ``None`` means no history (every project starts even).
    now
        Seconds from the scenario's start.
    policy
        Gives the lookback window and the epoch length.
    budget_capacity
        Capacity the budgets are shares of (``Scenario.capacity_h100()``); defaults to
        ``capacity``. Pass it when ``capacity`` is what is available now (nodes drained
        for maintenance): what a project is owed shrinks with a drain, its budget does
        not.

    Returns
    -------
    dict[str, ProjectStanding]
        For each project of ``org``:

        - ``owed_gpus``: :func:`water_fill` now;
        - ``ratio``: charged over owed H100-equivalent hours in ``[now - lookback,
          now)`` (:func:`fair_share_ratio`), the greedy scheduler's sort key (lower
          goes first); charged hours count urgent work at ``policy.urgent_charge``;
        - ``deficit_gpu_h``: owed minus charged hours over the same window, floored
          at 0;
        - ``headroom_gpu_h``: what it may still charge in the coming epoch
          (:func:`planner.budgets.headroom_gpu_h`).
    """
    owed = water_fill(org, demand, capacity)
    lookback, epoch = policy.lookback, policy.epoch
    past: dict[str, Totals] = {}
    budget_window: dict[str, Totals] = {}
    if ledger is not None:
        past = ledger.window_totals(now - lookback, now)
        # Headroom looks at the window that ends with the coming epoch.
        budget_window = ledger.window_totals(now + epoch - lookback, now)
    rates = budget_rates(org, capacity if budget_capacity is None else budget_capacity)
    none = Totals()
    out: dict[str, ProjectStanding] = {}
    for project, owed_gpus in owed.items():
        totals = past.get(project, none)
        charged_recent = budget_window.get(project, none).charged_gpu_h
        out[project] = ProjectStanding(
            project=project,
            owed_gpus=owed_gpus,
            ratio=fair_share_ratio(totals.charged_gpu_h, totals.owed_gpu_h),
            deficit_gpu_h=max(totals.owed_gpu_h - totals.charged_gpu_h, 0.0),
            headroom_gpu_h=headroom_gpu_h(rates[project], charged_recent, policy),
        )
    return out


def standings_at(
    scenario: Scenario, t: float, ledger: Ledger | None = None, policy: Policy | None = None
) -> dict[str, ProjectStanding]:
    """:func:`standings` of a scenario at ``t``: its org in force, demand and capacity."""
    return standings(
        org_at(scenario, t),
        demand_at(scenario, t),
        scenario.capacity_h100(),
        ledger,
        t,
        policy or scenario.policy,
    )


def projects_under(org: tuple[OrgUnit, ...], path: str) -> tuple[str, ...]:
    """The projects at or under the org unit ``path`` (for program totals)."""
    return tuple(p for p, unit in walk(org) if unit.is_project and (p == path or p.startswith(path + "/")))
