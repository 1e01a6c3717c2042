"""The epoch MIP: :func:`apply` builds it from an :class:`Epoch`, :func:`invert` reads it back.

The two halves share the :class:`Formulation` that records which model variable stands
for which decision, so no solver object ever reaches the domain. Every variable and
constraint is described in ``docs/formulation.md``; the names used there are the ones
used here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from models import Job
from planner.mip.assemble import Run, Start
from planner.mip.epoch import Epoch, JobClass
from planner.mip.model import LinearModel

#: Objective weight of one work quantum at a project's base fair-share slope.
BASE = 100
#: Concave utility: slope multipliers for work up to 1/2, 1, 2 times the owed share, then beyond.
SEGMENT_SLOPES = (8.0, 4.0, 1.0, 0.25)
SEGMENT_ENDS = (0.5, 1.0, 2.0)
#: Work conservation: every quantum of work, charged or not.
WORK_BONUS = 5
#: Inside a project: up to this per quantum for the highest priority, plus the urgent bonus.
PRIORITY_BONUS = 3
URGENT_BONUS = 5
#: Aging: per quantum per aging bucket (doubled for multi-node gangs).
AGING_BONUS = 1
#: A preemption costs this many slices of the victim's work at the base slope, plus the
#: restart overhead (or, for non-resumable work, the progress lost).
PREEMPT_SLICES = 0.5
MAX_LOSS_SLICES = 8.0


def project_weight(ratio: float) -> float:
    """Weight of a project's utility: 2 at ratio 0, 1 on its share, towards 0 far above."""
    return 2.0 / (1.0 + max(ratio, 0.0))


@dataclass
class Formulation:
    """The model of one epoch and the meaning of its variables."""

    epoch: Epoch
    model: LinearModel
    #: z[(running index, slice)] -> variable: the running job runs in that slice.
    z: dict[tuple[int, int], int] = field(default_factory=dict)
    #: x[(class index, pool, start slice, charged)] -> variable: members started so.
    x: dict[tuple[int, int, int, bool], int] = field(default_factory=dict)
    #: u[(project, segment)] -> variable: charged work in that utility segment.
    u: dict[tuple[str, int], int] = field(default_factory=dict)
    #: busy[(node, slice)] -> variable: a running single-node job holds the node.
    busy: dict[tuple[str, int], int] = field(default_factory=dict)

    def groups(self) -> list[list[int]]:
        """Variables that move together: each job class's, each running job's."""
        by_class: dict[int, list[int]] = {}
        for (c, _, _, _), var in self.x.items():
            by_class.setdefault(c, []).append(var)
        by_job: dict[int, list[int]] = {}
        for (j, _), var in self.z.items():
            by_job.setdefault(j, []).append(var)
        return list(by_class.values()) + list(by_job.values())

    def loose(self) -> list[int]:
        """Auxiliary variables (utility segments, busy nodes) that follow the others."""
        return list(self.u.values()) + list(self.busy.values())

    @property
    def trivial(self) -> bool:
        """Nothing to decide: no queued job to start and no running job to preempt."""
        return not self.x and not self.z


def apply(epoch: Epoch) -> Formulation:
    """Build the epoch's MIP (maximize) from ``epoch``."""
    f = Formulation(epoch=epoch, model=LinearModel())
    m = f.model
    S = epoch.slices
    standing = epoch.snapshot.standing
    ranks = _priority_rank(epoch)
    node_pool = {n: p.index for p in epoch.pools for n in p.nodes}
    # Occupancy terms per (pool, slice): GPUs, whole nodes; constants move to the rhs.
    gpu_terms: dict[tuple[int, int], list[tuple[int, int]]] = {}
    gpu_fixed: dict[tuple[int, int], int] = {}
    node_terms: dict[tuple[int, int], list[tuple[int, int]]] = {}
    node_fixed: dict[tuple[int, int], int] = {}
    multi_pools: set[int] = set()
    charge_terms: dict[str, list[tuple[int, int]]] = {}
    charge_fixed: dict[str, int] = {}
    work_terms: dict[str, list[tuple[int, int]]] = {}  # charged work, for the utility
    work_fixed: dict[str, int] = {}
    max_work: dict[str, int] = {}
    single_on_node: dict[tuple[str, int], list[int | None]] = {}  # None: fixed running

    # 1. Running jobs: z[j, k] for the slices between the contract and the finish.
    for j, r in enumerate(epoch.running):
        pool = epoch.pools[r.pool]
        job = r.state.job
        wq = epoch.work_q(job.gpus, pool)
        cq = epoch.charge_q(job.gpus, pool, job.urgent)
        project = job.project
        max_work[project] = max_work.get(project, 0) + wq * r.may
        prev: int | None = None
        for k in range(S):
            if k < min(r.must, r.may):
                var: int | None = None  # runs for sure
            elif k < r.may:
                var = m.add_var(f"z[{job.id},{k}]", 0, 1)
                f.z[(j, k)] = var
                if prev is not None:
                    m.add_constraint([(var, 1), (prev, -1)], "<=", 0, f"contiguous[{job.id},{k}]")
                prev = var
            else:
                continue  # finished or moved off
            key = (r.pool, k)
            if var is None:
                gpu_fixed[key] = gpu_fixed.get(key, 0) + r.open_gpus[k]
            else:
                gpu_terms.setdefault(key, []).append((var, r.open_gpus[k]))
            if r.multi:
                multi_pools.add(r.pool)
                if var is None:
                    node_fixed[key] = node_fixed.get(key, 0) + r.open_nodes[k]
                else:
                    node_terms.setdefault(key, []).append((var, r.open_nodes[k]))
            elif r.open_gpus[k]:
                single_on_node.setdefault((r.state.nodes[0], k), []).append(var)
            if r.state.charged:
                if var is None:
                    charge_fixed[project] = charge_fixed.get(project, 0) + cq
                    work_fixed[project] = work_fixed.get(project, 0) + wq
                else:
                    charge_terms.setdefault(project, []).append((var, cq))
                    work_terms.setdefault(project, []).append((var, wq))
            if var is not None:
                m.add_objective(var, WORK_BONUS * wq + _job_bonus(ranks, r.state.job, wq))
        if prev is not None and r.may == r.finish:
            # Ending before the finish is a preemption: pay for it unless it runs on.
            cost = _preempt_cost(epoch, r.state.job, wq, r.state.progress)
            m.add_objective(prev, cost)
            m.objective_offset -= cost
        fixed_slices = min(r.must, r.may)
        m.objective_offset += fixed_slices * (WORK_BONUS * wq + _job_bonus(ranks, r.state.job, wq))

    # 2. Queued classes: x[c, p, a, charged] members started in slice a on pool p.
    projects_short = _budget_short(epoch)
    for c in epoch.classes:
        count_terms: list[tuple[int, int]] = []
        for p in c.pools:
            pool = epoch.pools[p]
            taken = pool.taken(c.gpus)
            wq = epoch.work_q(c.gpus, pool)
            cq = epoch.charge_q(c.gpus, pool, c.urgent)
            multi = pool.multi(c.gpus)
            if multi:
                multi_pools.add(p)
            for a in range(S):
                span = c.length(a, S)
                room = min(pool.capacity(k) for k in range(a, a + span)) // taken
                if room <= 0:
                    continue
                ub = min(len(c.jobs), room)
                modes = [True, False] if c.allocated else [False]
                if c.allocated and c.project not in projects_short:
                    modes = [True]  # headroom covers every run: charging always wins
                for charged in modes:
                    var = m.add_var(f"x[{c.index},{p},{a},{int(charged)}]", 0, ub)
                    f.x[(c.index, p, a, charged)] = var
                    count_terms.append((var, 1))
                    for k in range(a, a + span):
                        gpu_terms.setdefault((p, k), []).append((var, taken))
                        if multi:
                            node_terms.setdefault((p, k), []).append(
                                (var, taken // pool.gpus_per_node)
                            )
                    gain = span * (WORK_BONUS * wq + _class_bonus(epoch, ranks, c, wq))
                    if c.resuming:
                        gain -= _resume_cost(epoch, wq)
                    m.add_objective(var, gain)
                    if charged:
                        charge_terms.setdefault(c.project, []).append((var, span * cq))
                        work_terms.setdefault(c.project, []).append((var, span * wq))
                    max_work[c.project] = max_work.get(c.project, 0) + span * wq * ub
        if count_terms:
            m.add_constraint(count_terms, "<=", len(c.jobs), f"count[{c.index}]")

    # 3. Capacity per pool and slice, in GPUs; whole nodes for multi-node gangs.
    for (p, k), terms in gpu_terms.items():
        cap = epoch.pools[p].capacity(k) - gpu_fixed.get((p, k), 0)
        m.add_constraint(terms, "<=", max(cap, 0), f"capacity[{p},{k}]")
    for (node, k), holders in single_on_node.items():
        p = node_pool[node]
        if p not in multi_pools:
            continue
        if any(h is None for h in holders):
            node_fixed[(p, k)] = node_fixed.get((p, k), 0) + 1
            continue
        b = m.add_var(f"busy[{node},{k}]", 0, 1)
        f.busy[(node, k)] = b
        for h in holders:
            assert h is not None
            m.add_constraint([(b, 1), (h, -1)], ">=", 0, f"busy[{node},{k}]")
        node_terms.setdefault((p, k), []).append((b, 1))
    for (p, k), terms in node_terms.items():
        if p not in multi_pools:
            continue
        whole = epoch.pools[p].open_nodes(k) - node_fixed.get((p, k), 0)
        m.add_constraint(terms, "<=", max(whole, 0), f"whole_nodes[{p},{k}]")

    # 4. Budgets: charged work within the headroom (or what contracts already hold).
    for project, terms in charge_terms.items():
        head = epoch.headroom_q.get(project, 0)
        fixed = charge_fixed.get(project, 0)
        m.add_constraint(terms, "<=", max(head - fixed, 0), f"budget[{project}]")

    # 5. Concave fair-share utility of charged work, per project.
    for project in sorted(set(work_terms) | set(work_fixed)):
        st = standing.get(project)
        weight = project_weight(st.ratio if st is not None else 1.0)
        target = epoch.target_q.get(project, 0)
        bounds = [round(e * target) for e in SEGMENT_ENDS]
        lengths = [bounds[0], bounds[1] - bounds[0], bounds[2] - bounds[1]]
        cap = max_work.get(project, 0) + work_fixed.get(project, 0)
        seg_vars: list[tuple[int, int]] = []
        for s, slope in enumerate(SEGMENT_SLOPES):
            length = lengths[s] if s < len(lengths) else cap
            length = min(length, cap)
            if length <= 0:
                continue
            var = m.add_var(f"u[{project},{s}]", 0, length)
            f.u[(project, s)] = var
            m.add_objective(var, max(round(BASE * weight * slope), 1))
            seg_vars.append((var, 1))
        if seg_vars:
            terms = seg_vars + [(v, -w) for v, w in work_terms.get(project, [])]
            m.add_constraint(terms, "<=", work_fixed.get(project, 0), f"utility[{project}]")
    return f


def _budget_short(epoch: Epoch) -> set[str]:
    """Projects whose headroom might not cover every run their jobs could make."""
    need: dict[str, int] = {}
    for r in epoch.running:
        if r.state.charged:
            pool = epoch.pools[r.pool]
            job = r.state.job
            need[job.project] = need.get(job.project, 0) + r.may * epoch.charge_q(
                job.gpus, pool, job.urgent
            )
    for c in epoch.classes:
        if c.allocated:
            worst = max(epoch.charge_q(c.gpus, epoch.pools[p], c.urgent) for p in c.pools)
            need[c.project] = need.get(c.project, 0) + worst * c.run * len(c.jobs)
    return {p for p, n in need.items() if n > epoch.headroom_q.get(p, 0)}


def _priority_rank(epoch: Epoch) -> dict[tuple[str, int], float]:
    levels: dict[str, set[int]] = {}
    for c in epoch.classes:
        levels.setdefault(c.project, set()).add(c.priority)
    for r in epoch.running:
        levels.setdefault(r.state.job.project, set()).add(r.state.job.priority)
    out: dict[tuple[str, int], float] = {}
    for project, prios in levels.items():
        ordered = sorted(prios)
        for i, p in enumerate(ordered):
            out[(project, p)] = i / (len(ordered) - 1) if len(ordered) > 1 else 0.0
    return out


Ranks = dict[tuple[str, int], float]


def _job_bonus(ranks: Ranks, job: Job, wq: int) -> int:
    bonus = round(PRIORITY_BONUS * ranks.get((job.project, job.priority), 0.0))
    if job.urgent:
        bonus += URGENT_BONUS
    return bonus * wq


def _class_bonus(epoch: Epoch, ranks: Ranks, c: JobClass, wq: int) -> int:
    bonus = round(PRIORITY_BONUS * ranks.get((c.project, c.priority), 0.0))
    if c.urgent:
        bonus += URGENT_BONUS
    multi = any(epoch.pools[p].multi(c.gpus) for p in c.pools)
    bonus += AGING_BONUS * c.aging * (2 if multi else 1)
    return bonus * wq


def _preempt_cost(epoch: Epoch, job: Job, wq: int, progress: float) -> int:
    lost = epoch.snapshot.policy.restart_overhead if job.resumable else progress
    slices = min(PREEMPT_SLICES + lost / epoch.slice_len, MAX_LOSS_SLICES)
    return max(round(BASE * slices * wq), 1)


def _resume_cost(epoch: Epoch, wq: int) -> int:
    return round(BASE * epoch.snapshot.policy.restart_overhead / epoch.slice_len * wq)


def invert(f: Formulation, values: npt.NDArray[np.int64]) -> tuple[dict[str, int], list[Start]]:
    """Read the solver's values back: each running job's end slice and the starts.

    Within a class the oldest members take the earliest starts.
    """
    epoch = f.epoch
    ends: dict[str, int] = {}
    for j, r in enumerate(epoch.running):
        end = min(r.must, r.may)
        for k in range(end, r.may):
            var = f.z.get((j, k))
            if var is None or values[var] < 1:
                break
            end = k + 1
        ends[r.id] = end
    starts: list[Start] = []
    by_class: dict[int, list[tuple[int, int, bool, int]]] = {}
    for (c, p, a, charged), var in f.x.items():
        n = int(values[var])
        if n > 0:
            by_class.setdefault(c, []).append((a, p, charged, n))
    for c_index, picks in by_class.items():
        members = iter(epoch.classes[c_index].jobs)
        for a, p, charged, n in sorted(picks, key=lambda t: (t[0], t[1], not t[2])):
            for _ in range(n):
                starts.append(Start(next(members), p, a, charged))
    return ends, starts


def hint_from_runs(f: Formulation, runs: list[Run]) -> dict[int, int]:
    """A complete warm start equal to a placed (feasible) plan such as the greedy one."""
    epoch = f.epoch
    values = np.zeros(f.model.num_vars, dtype=np.int64)
    by_id = {r.state.job.id: r for r in runs}
    for (j, k), var in f.z.items():
        run = by_id.get(epoch.running[j].id)
        values[var] = int(run is not None and run.running and k < run.last)
    class_of = {st.job.id: c for c in epoch.classes for st in c.jobs}
    for run in runs:
        if run.running:
            continue
        c = class_of[run.state.job.id]
        var_or_none = f.x.get((c.index, run.pool, run.first, run.charged))
        if var_or_none is None:
            return {}  # the run is not expressible in the model: no hint
        values[var_or_none] += 1
    for (node, k), var in f.busy.items():
        values[var] = int(any(r.running and node in r.nodes and k < r.last for r in runs))
    # Charged work per project fills the utility segments in order.
    work: dict[str, int] = {}
    for run in runs:
        if run.charged:
            pool = epoch.pools[run.pool]
            job = run.state.job
            work[job.project] = work.get(job.project, 0) + (run.last - run.first) * epoch.work_q(
                job.gpus, pool
            )
    for (project, _), var in sorted(f.u.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        take = min(work.get(project, 0), f.model.upper[var])
        values[var] = take
        work[project] = work.get(project, 0) - take
    if f.model.violations(values):
        return {}
    return {i: int(v) for i, v in enumerate(values)}
