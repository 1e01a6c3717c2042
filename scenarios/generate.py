"""A synthetic week of research work, shaped like the institute's (``workloads.generate``).

The generator is deterministic: :func:`generate_jobs` draws everything from one
``numpy.random.default_rng(spec.seed)``, so the same scenario and spec give the same jobs.

Rules (``docs/scenarios.md`` has the same text for users):

Offered load
    ``spec.load`` is the GPU-time the arrivals ask for, divided by the scenario's
    physical GPU capacity (all pools, no drains) times ``spec.days``. It is *physical*
    GPU-time: a job's duration does not depend on the GPU type it lands on. Each job
    class gets a fixed fraction of that GPU-time (:data:`CLASSES`: debug 3.5%,
    interactive 5%, batch 39.5%, pretrain 34%, unallocated 18%), and jobs of a class are
    drawn until the class's GPU-time is reached (the cut nearest the target), so the
    realised load matches ``spec.load`` within half a job per class, whatever the seed.
    Gang sizes come in shuffled blocks of 20 that hold each size in proportion to its
    weight, so even a short run has the whole mix.
    ``spec.backlog`` adds work already queued at time 0, in capacity-time (``36h`` is
    36 hours of every GPU), split the same way over batch, pretrain and unallocated work
    only (people submit debug work and sessions live).

Job classes
    ``debug``: 1-8 GPUs, 1-120 min (median 15 min), minimum runtime 5, 10 or 15 min,
    not resumable. ``interactive``: 1-8 GPU sessions of 1-10 h (median 3 h), protected
    for their whole length up to the policy's maximum, not resumable,
    ``kind: interactive``. ``batch``: 1-64 GPUs (mostly 8-64), 20 min-48 h (median
    3 h), minimum runtime 30 min (30%), 1 h (40%), 2 h (20%) or 4 h (10%), 80%
    resumable. ``pretrain``: 64-512 GPU gangs (multiples of 8) of 12 h-4 d (median
    30 h), minimum runtime 1-4 h, resumable, from the users of the heaviest quarter of
    the projects. ``unallocated``: 16-64 GPU jobs of 15 min-24 h (median 4 h), minimum
    runtime 0 (free work), resumable, ``kind: batch`` (kept above 8 GPUs so that the
    debug class, 8 GPUs or fewer with a contract of 15 min or less, holds only
    debugging work). Durations are log-normal, clipped to the ranges above.

Sweeps
    Debug, batch and unallocated jobs come in sweeps (on average 1.5, 4 and 8 jobs):
    one user, gang size, restriction and submit time, the jobs 10 s apart.

Projects and users
    Each project gets an activity weight: its effective share of the org tree times a
    log-normal factor, so demand follows the budget tree only loosely and a few projects
    are heavy. Every user (``user000``...) has one home project (each project gets one
    user first, while users last; the rest go by weight); a sweep's user is drawn by the
    users' activity weights and its project is the user's home project.

Arrivals
    Submissions follow a daily cycle (x1.6 at 14:00, x0.4 at 02:00) and a weekly one
    (weekends at half the weekday rate), anchored at the scenario's ``start`` (a Monday
    midnight when absent). Debug and interactive work follows the cycles fully, batch
    60%, unallocated 40%; pretraining arrives uniformly.

Other fields
    Priorities are 0 for 85% of jobs, 1-3 for 12% and -1 for 3%. About 0.5% of debug and
    batch jobs are urgent. 12% of sweeps are restricted to one GPU type and 4% to one
    cluster, chosen among the pools the gang fits, in proportion to the pools' GPUs.
    Gang sizes that fit no pool are dropped from a class; if none fits, the class uses
    the largest gang that fits (a multiple of 8 when one fits). Minimum runtimes never
    exceed the policy's ``max_min_runtime``. Times are whole seconds. Ids are
    ``g00000``, ``g00001``, ... in submit order.
"""


from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from models import GenerateSpec, Job, JobKind, Scenario, effective_shares
from models.cluster import Pool
from models.limits import MAX_JOBS
from scenarios.errors import ScenarioError

DAY = 86400.0
HOUR = 3600.0
MINUTE = 60.0


@dataclass(frozen=True)
class JobClass:
    """How the jobs of one class are drawn.

    ``gang_sizes``/``gang_weights`` give the gang size distribution; durations are
    log-normal with the median ``duration_median`` and log-sd ``duration_sigma``, clipped
    to ``[duration_min, duration_max]``; ``work_fraction`` is the class's part of the
    offered GPU-time; ``diurnal`` scales how strongly arrivals follow the daily cycle;
    ``sweep_mean`` is the mean number of jobs submitted together as one sweep (same
    user, gang size, restriction and submit time, 10 s apart).
    """

    name: str
    work_fraction: float
    gang_sizes: tuple[int, ...]
    gang_weights: tuple[float, ...]
    duration_median: float
    duration_sigma: float
    duration_min: float
    duration_max: float
    diurnal: float
    sweep_mean: float = 1.0


SIZE_BLOCK = 20
SWEEP_DEBUG = 1.5
SWEEP_BATCH = 4.0
SWEEP_UNALLOCATED = 8.0

CLASSES: tuple[JobClass, ...] = (
    JobClass("debug", 0.035, (1, 2, 4, 8), (0.35, 0.2, 0.2, 0.25),
             15 * MINUTE, 0.9, 1 * MINUTE, 2 * HOUR, 1.0, SWEEP_DEBUG),
    JobClass("interactive", 0.05, (1, 2, 4, 8), (0.3, 0.2, 0.2, 0.3),
             3 * HOUR, 0.6, 1 * HOUR, 10 * HOUR, 1.0),
    JobClass("batch", 0.395, (1, 2, 4, 8, 16, 32, 64), (0.04, 0.04, 0.07, 0.35, 0.25, 0.17, 0.08),
             3 * HOUR, 0.9, 20 * MINUTE, 48 * HOUR, 0.6, SWEEP_BATCH),
    JobClass("pretrain", 0.34, (64, 128, 256, 512), (0.35, 0.35, 0.2, 0.1),
             30 * HOUR, 0.6, 12 * HOUR, 4 * DAY, 0.0),
    JobClass("unallocated", 0.18, (16, 32, 64), (0.5, 0.35, 0.15),
             4 * HOUR, 0.8, 15 * MINUTE, 24 * HOUR, 0.4, SWEEP_UNALLOCATED),
)
"""The job classes, in the order they are drawn (the order is part of determinism)."""

# Kinds set explicitly; the others are derived from the shape (debug or batch).
_KINDS = {"interactive": JobKind.INTERACTIVE, "unallocated": JobKind.BATCH}

PRIORITY_VALUES = (0, 1, 2, 3, -1)
PRIORITY_WEIGHTS = (0.85, 0.06, 0.04, 0.02, 0.03)
URGENT_FRACTION = 0.005
TYPE_RESTRICTED_FRACTION = 0.12
CLUSTER_RESTRICTED_FRACTION = 0.04
PRETRAIN_PROJECT_FRACTION = 0.25


def generate_jobs(scenario: Scenario, spec: GenerateSpec) -> list[Job]:
    """Draw a synthetic workload for ``scenario``; deterministic for ``spec.seed``.

    Parameters
    ----------
    scenario
        Supplies the pools (capacity and which gangs fit), the org tree (projects and
        their shares), the policy (the minimum-runtime cap) and ``start`` (the
        weekday/time-of-day phase of arrivals). Its own workload is ignored.
    spec
        ``seed``, ``days``, ``load`` (offered physical GPU-time / capacity) and ``users``.

    Returns
    -------
    list[Job]
        Jobs sorted by submit time, with ids ``g00000``, ``g00001``, ... Each passes the
        scenario's validation.

    Raises
    ------
    ScenarioError
        When the spec asks for more than :data:`~models.limits.MAX_JOBS` jobs (checked
        while drawing, before the jobs are built).
    """
    rng = np.random.default_rng(spec.seed)
    pools = scenario.pool_gpus()
    capacity = float(sum(pools.values()))
    horizon = spec.days * DAY
    users, user_weight, user_project, heavy_users = _users(scenario, spec.users, rng)
    fits = _FitTable(scenario)
    arrivals = _ArrivalProfile(scenario.start, horizon)
    max_min = scenario.policy.max_min_runtime

    # Fields first, Job objects once the ids (submit order) are known.
    drafts: list[tuple[float, int, dict[str, Any]]] = []
    # Phase 0 is the backlog (all submitted at time 0), phase 1 the week's arrivals.
    phases = ((0, spec.backlog * capacity), (1, spec.load * capacity * horizon))
    for (phase, work), (cls_index, cls) in itertools.product(phases, enumerate(CLASSES)):
        # People at their desks submit debug work and sessions live, never as backlog.
        live_only = phase == 0 and cls.name in ("debug", "interactive")
        target = 0.0 if live_only else work * cls.work_fraction
        sizes = fits.sizes_for(cls)
        gpus, durations, group, rank = _draw_until(rng, cls, sizes, target, MAX_JOBS - len(drafts))
        n, groups = len(gpus), int(group[-1]) + 1 if len(group) else 0
        if phase == 0:
            submit = np.zeros(n)
        else:
            # One submit time, user and restriction per sweep; its jobs follow 10 s apart.
            submit = np.minimum(
                arrivals.sample(rng, groups, cls.diurnal)[group] + 10.0 * rank,
                np.ceil(horizon) - 1,
            )
        pick_from = heavy_users if cls.name == "pretrain" else np.arange(len(users))
        weights = user_weight[pick_from] / user_weight[pick_from].sum()
        who = rng.choice(pick_from, size=groups, p=weights)[group]
        priority = rng.choice(PRIORITY_VALUES, size=n, p=PRIORITY_WEIGHTS)
        urgent = rng.random(n) < (URGENT_FRACTION if cls.name in ("debug", "batch") else 0.0)
        restrict = rng.random(groups)[group]
        restrict_pick = rng.random(groups)[group]
        min_runtime, resumable = _contract(rng, cls.name, durations)
        for i in range(n):
            gpu_types, clusters = fits.restriction(
                int(gpus[i]), restrict[i], restrict_pick[i], pools
            )
            fields = dict(
                project=user_project[who[i]],
                user=users[who[i]],
                gpus=int(gpus[i]),
                gpu_types=gpu_types,
                clusters=clusters,
                submit=float(submit[i]),
                duration=float(durations[i]),
                min_runtime=float(min(min_runtime[i], max_min)),
                resumable=bool(resumable[i]),
                priority=int(priority[i]),
                urgent=bool(urgent[i]),
                kind=_KINDS.get(cls.name),
            )
            drafts.append((float(submit[i]), cls_index, fields))
    drafts.sort(key=lambda d: (d[0], d[1]))
    return [Job(id=f"g{index:05d}", **fields) for index, (_, _, fields) in enumerate(drafts)]


def _draw_until(
    rng: np.random.Generator,
    cls: JobClass,
    sizes: tuple[tuple[int, ...], np.ndarray],
    target: float,
    limit: int = MAX_JOBS,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Jobs of ``cls`` until their GPU-time reaches ``target``.

    Returns each job's gang size, duration, sweep (group) number and rank inside its
    sweep. Drawn in vectorised batches of sweeps; the cut is at the job whose running
    total is nearest the target, so a class misses it by at most half a job.
    """
    values, weights = sizes
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    total = 0.0
    groups_so_far = 0
    count = 0
    while total < target:
        batch = 256
        size = rng.geometric(1.0 / cls.sweep_mean, size=batch)
        group = np.repeat(np.arange(batch), size)
        rank = np.arange(len(group)) - np.repeat(np.cumsum(size) - size, size)
        g = _stratified(rng, values, weights, batch)[group]
        d = np.exp(rng.normal(np.log(cls.duration_median), cls.duration_sigma, size=len(group)))
        d = np.round(np.clip(d, cls.duration_min, cls.duration_max))
        work = np.cumsum(g * d) + total
        stop = int(np.searchsorted(work, target))  # first index whose total >= target
        if stop < len(group):
            before = float(work[stop - 1]) if stop > 0 else total
            if target - before >= float(work[stop]) - target:
                stop += 1  # including the job that crosses the target lands nearer
        cut = slice(0, min(stop, len(group)))
        parts.append((g[cut], d[cut], group[cut] + groups_so_far, rank[cut]))
        count += cut.stop
        if count > limit:
            raise ScenarioError(
                None,
                f"workloads.generate: the load, days and backlog ask for more than "
                f"{MAX_JOBS:,} jobs on this capacity (the limit); lower them",
            )
        total = float(work[-1])
        groups_so_far += batch
        if stop < len(group):
            break
    if not parts:
        empty = np.zeros(0, dtype=int)
        return empty, np.zeros(0), empty, empty
    g_all, d_all, grp, rnk = (np.concatenate(p) for p in zip(*parts, strict=True))
    # Renumber sweeps densely (the last batch may end inside a sweep).
    _, dense = np.unique(grp, return_inverse=True)
    return g_all, d_all, dense, rnk


def _stratified(
    rng: np.random.Generator, values: tuple[int, ...], weights: np.ndarray, n: int
) -> np.ndarray:
    """``n`` gang sizes in shuffled blocks of :data:`SIZE_BLOCK` that follow the weights.

    Independent draws would let a week of ~30 pretraining jobs miss the 512-GPU gangs
    altogether; blocks keep each size's count within one of its share in every block.
    """
    exact = np.asarray(weights) * SIZE_BLOCK
    counts = np.floor(exact).astype(int)
    # Largest remainders take the slots that rounding down left over.
    for k in np.argsort(-(exact - counts), kind="stable")[: SIZE_BLOCK - counts.sum()]:
        counts[k] += 1
    pattern = np.repeat(np.asarray(values), counts)
    blocks = [rng.permutation(pattern) for _ in range(-(-n // SIZE_BLOCK))]
    out: np.ndarray = np.concatenate(blocks)[:n]
    return out


def _contract(
    rng: np.random.Generator, name: str, durations: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Minimum runtime (seconds) and resumable flag for each job of class ``name``."""
    n = len(durations)
    if name == "debug":
        return rng.choice([5 * MINUTE, 10 * MINUTE, 15 * MINUTE], size=n), np.zeros(n, dtype=bool)
    if name == "interactive":
        # Sessions ask to be protected for their whole (expected) length.
        return np.round(durations), np.zeros(n, dtype=bool)
    if name == "batch":
        mr = rng.choice([30 * MINUTE, 1 * HOUR, 2 * HOUR, 4 * HOUR], size=n, p=[0.3, 0.4, 0.2, 0.1])
        return mr, rng.random(n) < 0.8
    if name == "pretrain":
        return rng.choice([1 * HOUR, 2 * HOUR, 3 * HOUR, 4 * HOUR], size=n), np.ones(n, dtype=bool)
    return np.zeros(n), np.ones(n, dtype=bool)  # unallocated


def _users(
    scenario: Scenario, count: int, rng: np.random.Generator
) -> tuple[list[str], np.ndarray, list[str], np.ndarray]:
    """Users, their activity weights, their home projects, and the pretraining users."""
    projects = list(scenario.projects)
    shares = effective_shares(scenario.org)
    weight = np.array([shares[p] for p in projects]) * np.exp(rng.normal(0.0, 0.75, len(projects)))
    weight /= weight.sum()
    # Every project gets a user while users last; the rest go by project weight.
    homes = list(range(min(count, len(projects))))
    if count > len(projects):
        homes += list(rng.choice(len(projects), size=count - len(projects), p=weight))
    per_project = np.bincount(homes, minlength=len(projects))
    user_weight = np.array(
        [weight[h] / per_project[h] for h in homes]
    ) * np.exp(rng.normal(0.0, 0.5, count))
    users = [f"user{i:03d}" for i in range(count)]
    user_project = [projects[h] for h in homes]
    n_heavy = max(1, round(PRETRAIN_PROJECT_FRACTION * len(projects)))
    heavy = set(np.argsort(-weight, kind="stable")[:n_heavy].tolist())
    # With few users, none may live in a heavy project: then anyone may pretrain.
    heavy_users = np.array([i for i, h in enumerate(homes) if h in heavy] or range(count))
    return users, user_weight, user_project, heavy_users


class _FitTable:
    """Which pools a gang of a given size fits, and the restriction draws that use it."""

    def __init__(self, scenario: Scenario) -> None:
        self._scenario = scenario
        self._cache: dict[int, tuple[Pool, ...]] = {}

    def pools_for(self, gpus: int) -> tuple[Pool, ...]:
        if gpus not in self._cache:
            probe = Job(id="probe", project="-", gpus=gpus)
            s = self._scenario
            self._cache[gpus] = tuple(
                p for c in s.clusters for p in c.pools() if s.job_fits(probe, c, p.gpu_type)
            )
        return self._cache[gpus]

    def max_gang(self) -> int:
        """The largest gang that fits some pool, preferring a multiple of 8 (whole nodes)."""
        s = self._scenario
        top = sum(n.gpus for n in s.nodes)
        fitting = [g for g in range(top, 0, -1) if self.pools_for(g)]
        eights = [g for g in fitting if g % 8 == 0]
        return eights[0] if eights else fitting[0]

    def sizes_for(self, cls: JobClass) -> tuple[tuple[int, ...], np.ndarray]:
        """The class's sizes that fit some pool, with weights, or the largest gang that fits."""
        kept = [
            (g, w) for g, w in zip(cls.gang_sizes, cls.gang_weights, strict=True) if self.pools_for(g)
        ]
        if not kept:
            kept = [(self.max_gang(), 1.0)]
        w = np.array([k[1] for k in kept])
        return tuple(k[0] for k in kept), w / w.sum()

    def restriction(
        self, gpus: int, draw: float, pick: float, pool_gpus: dict[Pool, int]
    ) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
        """``(gpu_types, clusters)`` for one job from two uniform draws."""
        if draw >= TYPE_RESTRICTED_FRACTION + CLUSTER_RESTRICTED_FRACTION:
            return None, None
        pools = self.pools_for(gpus)
        by_type = draw < TYPE_RESTRICTED_FRACTION
        options: dict[str, float] = {}
        for p in pools:
            key = p.gpu_type if by_type else p.cluster
            options[key] = options.get(key, 0.0) + pool_gpus[p]
        names = sorted(options)
        cum = np.cumsum([options[k] for k in names])
        chosen = names[int(np.searchsorted(cum, pick * cum[-1], side="right").clip(0, len(names) - 1))]
        return ((chosen,), None) if by_type else (None, (chosen,))


class _ArrivalProfile:
    """Hourly arrival intensity over the horizon: a daily and a weekly cycle."""

    def __init__(self, start: datetime | None, horizon: float) -> None:
        hours = int(np.ceil(horizon / HOUR))
        # Phase: hours since the Monday 00:00 before the start (a Monday midnight if none).
        offset = 0.0
        if start is not None:
            offset = start.weekday() * 24 + start.hour + start.minute / 60 + start.second / 3600
        clock = (np.arange(hours) + 0.5 + offset) % (24 * 7)
        hour_of_day = clock % 24
        weekend = clock >= 24 * 5
        self._daily = 1.0 + 0.6 * np.cos(2 * np.pi * (hour_of_day - 14) / 24)
        self._weekly = np.where(weekend, 0.5, 1.0)
        self._hours = hours
        self._horizon = horizon

    def sample(self, rng: np.random.Generator, n: int, diurnal: float) -> np.ndarray:
        """``n`` submit times (whole seconds in ``[0, horizon)``), following the cycles.

        ``diurnal`` in [0, 1] blends between uniform (0) and the full cycles (1).
        """
        intensity = (1 - diurnal) + diurnal * self._daily * self._weekly
        # The last hour may be partial: weigh it by the part inside the horizon.
        width = np.minimum(1.0, self._horizon / HOUR - np.arange(self._hours))
        p = intensity * width
        hour = rng.choice(self._hours, size=n, p=p / p.sum())
        t = (hour + rng.random(n) * width[hour]) * HOUR
        out: np.ndarray = np.minimum(np.floor(t), np.ceil(self._horizon) - 1)
        return out
