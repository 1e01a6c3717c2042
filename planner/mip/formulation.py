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

from models import Job, drain_guard
from planner.mip.assemble import Run, Start
from planner.mip.epoch import Epoch, JobClass, SubPool
from planner.mip.model import LinearModel
from planner.mip.objective import (
    AGING_BONUS,
    BASE,
    FREE_SLOPE,
    PRIORITY_BONUS,
    URGENT_BONUS,
    WORK_BONUS,
    free_slope,
    preempt_slices,
    segment_ends,
    segment_slopes,
)


@dataclass(frozen=True)
class StartTable:
    """The start variables of a :class:`Formulation`: entry ``i`` is ``x[(cls[i],
    pool[i], start[i])] = var[i]``."""

    cls: npt.NDArray[np.int64]
    pool: npt.NDArray[np.int64]
    start: npt.NDArray[np.int64]
    var: npt.NDArray[np.int64]


@dataclass
class Formulation:
    """The model of one epoch and the meaning of its variables."""

    epoch: Epoch
    model: LinearModel
    #: z[(running index, slice)] -> variable: the running job runs in that slice.
    z: dict[tuple[int, int], int] = field(default_factory=dict)
    #: x[(class index, pool, start slice)] -> variable: members started so.
    x: dict[tuple[int, int, int], int] = field(default_factory=dict)
    #: w[(project, urgent)] -> variable: charged work (quanta) of its funded work.
    w: dict[tuple[str, bool], int] = field(default_factory=dict)
    #: y[(project, urgent, work per slice)] -> variable: charged slices of that size.
    y: dict[tuple[str, bool, int], int] = field(default_factory=dict)
    #: u[(project, segment)] -> variable: charged work in that utility segment.
    u: dict[tuple[str, int], int] = field(default_factory=dict)
    #: f[project] -> variable: uncharged work (quanta) counted inside its owed share.
    f: dict[str, int] = field(default_factory=dict)
    #: busy[(node, slice)] -> variable: a running single-node job holds the node.
    busy: dict[tuple[str, int], int] = field(default_factory=dict)
    #: (row, start variable, coefficient, capped coefficient): the ``charged_slices``
    #: coefficients that :meth:`cap_charges` caps at the slices ``y`` can still take.
    charge_caps: list[tuple[int, int, int, int]] = field(default_factory=list)
    #: (row, end): the capped-work rows (``cut_work``, ``cut_free``) and the most work
    #: their utility side can hold, what :mod:`planner.mip.lifted` lifts.
    work_rows: list[tuple[int, int]] = field(default_factory=list)
    _starts: StartTable | None = field(default=None, init=False, repr=False, compare=False)

    def cap_charges(self) -> None:
        """Give the model the capped ``charged_slices`` coefficients (:attr:`charge_caps`):
        the same integer plans, fewer fractional ones."""
        by_row: dict[int, dict[int, int]] = {}
        for row, var, _, capped in self.charge_caps:
            by_row.setdefault(row, {})[var] = capped
        for row, caps in by_row.items():
            c = self.model.constraints[row]
            coefs = c.coefs.copy()
            for i, var in enumerate(c.vars.tolist()):
                coefs[i] = caps.get(var, coefs[i])
            self.model.set_coefs(row, coefs)

    def start_table(self) -> StartTable:
        """The start variables ``x`` as arrays, in the order of ``x`` (see
        :class:`StartTable`); made once per number of starts (``x`` only grows, while
        :func:`apply` builds it)."""
        if self._starts is None or len(self._starts.var) != len(self.x):
            n = len(self.x)
            keys = np.array(list(self.x), dtype=np.int64).reshape(n, 3)
            self._starts = StartTable(
                cls=keys[:, 0].copy(),
                pool=keys[:, 1].copy(),
                start=keys[:, 2].copy(),
                var=np.fromiter(self.x.values(), dtype=np.int64, count=n),
            )
        return self._starts

    def groups(self) -> list[list[int]]:
        """Variables that move together: each job class's, each running job's."""
        table = self.start_table()
        by_class = [table.var[rows].tolist() for rows in self.class_starts()]
        by_job: dict[int, list[int]] = {}
        for (j, _), var in self.z.items():
            by_job.setdefault(j, []).append(var)
        return by_class + list(by_job.values())

    def class_starts(self) -> list[npt.NDArray[np.int64]]:
        """Each class's rows of :meth:`start_table`, classes in the order ``x`` first
        names them (as :meth:`groups`)."""
        return _first_touch_groups(self.start_table().cls)

    def group_projects(self) -> list[str]:
        """The project of each of :meth:`groups`, in the same order."""
        table = self.start_table()
        classes = [int(table.cls[rows[0]]) for rows in self.class_starts()]
        jobs = dict.fromkeys(j for j, _ in self.z)  # first-seen order, as groups()
        return [self.epoch.classes[c].project for c in classes] + [
            self.epoch.running[j].state.job.project for j in jobs
        ]

    def project_vars(self) -> dict[str, list[int]]:
        """Each project's utility variables (``u``, ``f``)."""
        out: dict[str, list[int]] = {}
        for (project, _), var in self.u.items():
            out.setdefault(project, []).append(var)
        for project, var in self.f.items():
            out.setdefault(project, []).append(var)
        return out

    def var_pools(self) -> npt.NDArray[np.int64]:
        """The sub-pool of each job decision (starts ``x``, running slices ``z``); -1 for
        the auxiliary variables."""
        out = np.full(self.model.num_vars, -1, dtype=np.int64)
        for (_, p, _), var in self.x.items():
            out[var] = p
        for (j, _), var in self.z.items():
            out[var] = self.epoch.running[j].pool
        return out

    def coupling_rows(self) -> list[int]:
        """Rows that link projects: pool capacity (and the nodes left to the starts that
        keep off closing nodes), whole nodes, node-count cuts, and the busy-node rows (a
        node's single-node jobs may be of several projects). Without them the model
        falls apart into one part per project (:func:`planner.mip.relax.lagrangian_bound`)."""
        shared = ("capacity[", "drain_capacity[", "whole_nodes[", "cut_nodes[", "busy[")
        return [i for i, c in enumerate(self.model.constraints) if c.name.startswith(shared)]

    def decisions(self) -> npt.NDArray[np.bool_]:
        """Per variable, whether it is a decision (a start or a running slice) rather
        than one that follows from them (:meth:`loose`)."""
        out = np.zeros(self.model.num_vars, dtype=bool)
        out[list(self.x.values())] = True
        out[list(self.z.values())] = True
        return out

    def loose(self) -> list[int]:
        """Auxiliary variables (utility segments, busy nodes) that follow the others."""
        return (
            list(self.u.values()) + list(self.busy.values()) + list(self.w.values())
            + list(self.f.values()) + list(self.y.values())
        )

    @property
    def trivial(self) -> bool:
        """Nothing to decide: no queued job to start and no running job to preempt."""
        return not self.x and not self.z


def apply(epoch: Epoch) -> Formulation:
    """Build the epoch's MIP (maximize) from ``epoch``."""
    f = Formulation(epoch=epoch, model=LinearModel())
    m = f.model
    S = epoch.slices
    ranks = _priority_rank(epoch)
    node_pool = {n: p.index for p in epoch.pools for n in p.nodes}
    # Occupancy terms per (pool, slice): GPUs, whole nodes; constants move to the rhs.
    gpu_terms: dict[tuple[int, int], list[tuple[int, int]]] = {}
    gpu_fixed: dict[tuple[int, int], int] = {}
    node_terms: dict[tuple[int, int], list[tuple[int, int]]] = {}
    node_fixed: dict[tuple[int, int], int] = {}
    node_pools: set[int] = set()
    # Funded work per (project, urgent): variable terms, the contracted constant, the most.
    funded_terms: dict[tuple[str, bool], list[tuple[int, int]]] = {}
    funded_fixed: dict[tuple[str, bool], int] = {}
    funded_max: dict[tuple[str, bool], int] = {}
    # Funded slices per (project, urgent, work per slice): terms (var, slices), the
    # contracted constant, the most: what the charged-slice counts y may take.
    slice_terms: dict[tuple[str, bool, int], list[tuple[int, int]]] = {}
    slice_fixed: dict[tuple[str, bool, int], int] = {}
    slice_max: dict[tuple[str, bool, int], int] = {}
    # The most each project could be charged, were everything it could run to run.
    charge_most: dict[str, int] = {}
    single_on_node: dict[tuple[str, int], list[int | None]] = {}  # None: fixed running
    # All work per project (funded or free): variable terms, the contracted constant.
    work_terms: dict[str, list[tuple[int, int]]] = {}
    work_fixed: dict[str, int] = {}
    # Per project, the contracted work of each running job (for the capped-work cuts).
    fixed_pieces: dict[str, list[int]] = {}
    funded_pieces: dict[str, list[int]] = {}

    # 1. Running jobs: z[j, k] for the slices between the contract and the finish.
    for j, r in enumerate(epoch.running):
        pool = epoch.pools[r.pool]
        job = r.state.job
        wq = epoch.work_q(job.gpus, pool)
        fund = (job.project, job.urgent)
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
                node_pools.add(r.pool)
                if var is None:
                    node_fixed[key] = node_fixed.get(key, 0) + r.open_nodes[k]
                else:
                    node_terms.setdefault(key, []).append((var, r.open_nodes[k]))
            elif r.open_gpus[k]:
                single_on_node.setdefault((r.state.nodes[0], k), []).append(var)
            if var is None:
                work_fixed[job.project] = work_fixed.get(job.project, 0) + wq
            else:
                work_terms.setdefault(job.project, []).append((var, wq))
            if job.allocated:
                size = (job.project, job.urgent, wq)
                funded_max[fund] = funded_max.get(fund, 0) + wq
                charge_most[job.project] = charge_most.get(job.project, 0) + epoch.charge_of(wq, job.urgent)
                slice_max[size] = slice_max.get(size, 0) + 1
                if var is None:
                    funded_fixed[fund] = funded_fixed.get(fund, 0) + wq
                    slice_fixed[size] = slice_fixed.get(size, 0) + 1
                else:
                    funded_terms.setdefault(fund, []).append((var, wq))
                    slice_terms.setdefault(size, []).append((var, 1))
            if var is not None:
                m.add_objective(var, WORK_BONUS * wq + _job_bonus(ranks, job, wq))
        if prev is not None and r.may == r.finish:
            # Ending before the finish is a preemption: pay for it unless it runs on.
            cost = _preempt_cost(epoch, job, wq, r.state.progress)
            m.add_objective(prev, cost)
            m.objective_offset -= cost
        fixed_slices = min(r.must, r.may)
        m.objective_offset += fixed_slices * (WORK_BONUS * wq + _job_bonus(ranks, job, wq))
        piece = sum(wq for k in range(fixed_slices) if k < r.may)
        if piece:
            fixed_pieces.setdefault(job.project, []).append(piece)
            if job.allocated:
                funded_pieces.setdefault(job.project, []).append(piece)

    # 2. Queued classes: x[c, p, a] members started in slice a on pool p. Built as
    #    arrays (:func:`_queued_starts`): with tens of thousands of starts, a Python
    #    loop over them was most of the model's build. Variables, terms and rows come
    #    in the order a loop over classes, pools and start slices gives them.
    st = _queued_starts(epoch, ranks)
    node_pools.update(st.node_pools)
    n = len(st.var_cls)
    first = m.add_vars(
        [
            f"x[{epoch.classes[i].index},{p},{a}]"
            for i, p, a in zip(st.var_cls.tolist(), st.var_pool.tolist(), st.var_start.tolist(), strict=True)
        ],
        [0] * n,
        st.ub.tolist(),
    )
    xvars = np.arange(first, first + n, dtype=np.int64)
    class_index = np.array([c.index for c in epoch.classes], dtype=np.int64)
    f.x.update(
        zip(
            zip(class_index[st.var_cls].tolist(), st.var_pool.tolist(), st.var_start.tolist(), strict=True),
            xvars.tolist(),
            strict=True,
        )
    )
    m.add_objectives(xvars, st.gain)
    for rows in _first_touch_groups(st.var_cls):
        i = int(st.var_cls[rows[0]])
        c = epoch.classes[i]
        m.add_row(xvars[rows], np.ones(len(rows), dtype=np.int64), "<=", len(c.jobs), f"count[{c.index}]")
    # Occupancy: a start holds its pool in every slice it runs.
    along = np.repeat(np.arange(n), st.span)
    slice_of = st.var_start[along] + (np.arange(len(along)) - np.repeat(np.cumsum(st.span) - st.span, st.span))
    occ_key = st.var_pool[along] * S + slice_of
    for rows in _first_touch_groups(occ_key):
        key = (int(st.var_pool[along[rows[0]]]), int(slice_of[rows[0]]))
        gpu_terms.setdefault(key, []).extend(_pairs(xvars[along[rows]], st.gpus[along[rows]]))
    holds = st.whole[along] > 0
    for rows in _first_touch_groups(occ_key[holds]):
        held = along[holds][rows]
        key = (int(st.var_pool[held[0]]), int(slice_of[holds][rows[0]]))
        node_terms.setdefault(key, []).extend(_pairs(xvars[held], st.whole[held]))
    # Work, funded work and funded slices per project (their orders do not matter:
    # each is looked up by key or walked sorted).
    projects = sorted({c.project for c in epoch.classes})
    position = {project: i for i, project in enumerate(projects)}
    project_of = np.array([position[c.project] for c in epoch.classes] or [0], dtype=np.int64)
    var_project = project_of[st.var_cls]
    work = st.span * st.wq
    for rows in _first_touch_groups(var_project):
        project = projects[int(var_project[rows[0]])]
        work_terms.setdefault(project, []).extend(_pairs(xvars[rows], work[rows]))
    funded = np.flatnonzero(st.allocated)
    for rows in _first_touch_groups(var_project[funded] * 2 + st.urgent[funded]):
        at = funded[rows]
        c = epoch.classes[int(st.var_cls[at[0]])]
        fund = (c.project, c.urgent)
        funded_terms.setdefault(fund, []).extend(_pairs(xvars[at], work[at]))
        funded_max[fund] = funded_max.get(fund, 0) + int((work[at] * st.ub[at]).sum())
    size_key = (var_project[funded] * 2 + st.urgent[funded]) * (int(st.wq.max(initial=0)) + 1) + st.wq[funded]
    for rows in _first_touch_groups(size_key):
        at = funded[rows]
        c = epoch.classes[int(st.var_cls[at[0]])]
        size = (c.project, c.urgent, int(st.wq[at[0]]))
        slice_terms.setdefault(size, []).extend(_pairs(xvars[at], st.span[at]))
        slice_max[size] = slice_max.get(size, 0) + int((st.span[at] * st.ub[at]).sum())
    # The most a class could be charged: its members, each at its costliest start.
    for rows in _first_touch_groups(st.var_cls[funded]):
        at = funded[rows]
        c = epoch.classes[int(st.var_cls[at[0]])]
        most = int((st.span[at] * st.charge[at]).max())
        if most:
            charge_most[c.project] = charge_most.get(c.project, 0) + most * len(c.jobs)

    # 3. Capacity per pool and slice, in GPUs; whole nodes for gangs that need them.
    for (p, k), terms in gpu_terms.items():
        cap = epoch.pools[p].capacity(k) - gpu_fixed.get((p, k), 0)
        m.add_constraint(terms, "<=", max(cap, 0), f"capacity[{p},{k}]")
    _drain_capacity(f, st, xvars)
    for (node, k), holders in single_on_node.items():
        p = node_pool[node]
        if p not in node_pools:
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
        if p not in node_pools:
            continue
        whole = epoch.pools[p].open_nodes(k) - node_fixed.get((p, k), 0)
        m.add_constraint(terms, "<=", max(whole, 0), f"whole_nodes[{p},{k}]")

    # 4. Budgets, in whole slices as the plan charges them (assemble.charge_runs):
    #    y[P, urgent, q] charged slices of q quanta each, at most the funded slices of
    #    that size run; w[P, urgent] their work; each slice costs its charge, and the
    #    charges stay within the headroom. A project whose headroom covers everything it
    #    could run (``ample``) is charged all its funded work: w[P, urgent] <= its
    #    funded work, no counts and no budget row, so the model stays small.
    ample = {p for p, most in charge_most.items() if most <= epoch.headroom_q.get(p, 0)}
    for size in sorted(slice_max):
        project, urgent, q = size
        # No more slices of this size than the headroom pays for: integer counts meet
        # it, and the LP can no longer charge a fraction of a slice the headroom cannot
        # pay for (a project with 500 quanta left "charging" 0.78 of a 640-quanta slice).
        top = min(slice_max[size], epoch.headroom_q.get(project, 0) // epoch.charge_of(q, urgent))
        if top <= 0 or project in ample:
            continue
        y = m.add_var(f"y[{project},{'urgent' if urgent else 'normal'},{q}]", 0, top)
        f.y[size] = y
        terms = [(y, 1)] + [(v, -n) for v, n in slice_terms.get(size, [])]
        # A start makes room for at most the slices y can still take (top less the
        # fixed ones): capped there, its coefficient keeps every integer plan and the
        # LP can no longer charge a whole slice for a quarter of a long start. Kept
        # aside: the LP-guided path applies the caps where they lower the LP bound.
        fixed = slice_fixed.get(size, 0)
        room = max(top - fixed, 1)
        row = len(m.constraints)
        f.charge_caps.extend((row, v, -n, -room) for v, n in slice_terms.get(size, []) if n > room)
        m.add_constraint(terms, "<=", fixed, f"charged_slices[{project},{int(urgent)},{q}]")
    by_fund: dict[tuple[str, bool], list[tuple[int, int]]] = {}
    for (project, urgent, q), y in f.y.items():
        by_fund.setdefault((project, urgent), []).append((q, y))
    for fund in sorted(funded_max):
        project, urgent = fund
        kind = "urgent" if urgent else "normal"
        if project in ample:
            if funded_max[fund] <= 0:
                continue
            w = m.add_var(f"w[{project},{kind}]", 0, funded_max[fund])
            f.w[fund] = w
            terms = [(w, 1)] + [(v, -q) for v, q in funded_terms.get(fund, [])]
            m.add_constraint(terms, "<=", funded_fixed.get(fund, 0), f"funded[{project},{int(urgent)}]")
            continue
        sizes = by_fund.get(fund, [])
        if not sizes:
            continue
        top = sum(q * m.upper[y] for q, y in sizes)
        w = m.add_var(f"w[{project},{kind}]", 0, top)
        f.w[fund] = w
        terms = [(w, 1)] + [(y, -q) for q, y in sizes]
        m.add_constraint(terms, "<=", 0, f"funded[{project},{int(urgent)}]")
    for project in sorted({p for p, _ in f.w} - ample):
        terms = [
            (y, epoch.charge_of(q, urgent))
            for urgent in (False, True)
            for q, y in by_fund.get((project, urgent), [])
        ]
        m.add_constraint(terms, "<=", epoch.headroom_q.get(project, 0), f"budget[{project}]")

    # 5. Concave fair-share utility of charged work, per project.
    for project in sorted({p for p, _ in f.w}):
        bounds = segment_ends(epoch, project)
        lengths = [bounds[0], bounds[1] - bounds[0], bounds[2] - bounds[1]]
        w_vars = [f.w[(project, u)] for u in (False, True) if (project, u) in f.w]
        cap = sum(m.upper[v] for v in w_vars)
        seg_vars: list[tuple[int, int]] = []
        for s, slope in enumerate(segment_slopes(epoch, project)):
            length = min(lengths[s] if s < len(lengths) else cap, cap)
            if length <= 0:
                continue
            var = m.add_var(f"u[{project},{s}]", 0, length)
            f.u[(project, s)] = var
            m.add_objective(var, slope)
            seg_vars.append((var, 1))
        if seg_vars:
            terms = seg_vars + [(v, -1) for v in w_vars]
            m.add_constraint(terms, "<=", 0, f"utility[{project}]")

    # 6. Uncharged work inside the owed share: f[P] <= its work minus its charged work,
    #    and with the charged work's first two segments (min(w, T)) at most T.
    for project in sorted(work_terms.keys() | work_fixed.keys()):
        target = epoch.target_q.get(project, 0)
        if target <= 0 or FREE_SLOPE <= 0:
            continue
        fv = m.add_var(f"f[{project}]", 0, target)
        f.f[project] = fv
        m.add_objective(fv, free_slope(epoch, project))
        w_vars = [f.w[(project, u)] for u in (False, True) if (project, u) in f.w]
        terms = [(fv, 1)] + [(v, -q) for v, q in work_terms.get(project, [])]
        terms += [(v, 1) for v in w_vars]
        m.add_constraint(terms, "<=", work_fixed.get(project, 0), f"free[{project}]")
        within = [(f.u[(project, s)], 1) for s in (0, 1) if (project, s) in f.u]
        if within:
            m.add_constraint([(fv, 1)] + within, "<=", target, f"free_share[{project}]")

    # 7. Cuts: valid for every integer solution, they only tighten the LP relaxation.
    _capped_work_cuts(f, funded_terms, funded_pieces, work_terms, fixed_pieces)
    _node_cuts(f, node_terms, node_fixed, node_pools)
    return f


@dataclass(frozen=True)
class _Starts:
    """The start variables of the queued classes, as arrays, one entry per variable in
    the order of classes, their pools, then start slices; only starts with room."""

    var_cls: npt.NDArray[np.int64]  # position in ``epoch.classes``
    var_pool: npt.NDArray[np.int64]
    var_start: npt.NDArray[np.int64]
    span: npt.NDArray[np.int64]  # slices a member started so runs
    ub: npt.NDArray[np.int64]  # the most members started so
    gpus: npt.NDArray[np.int64]  # GPUs each holds in the capacity rows
    whole: npt.NDArray[np.int64]  # whole nodes each holds (0: none of its own)
    wq: npt.NDArray[np.int64]  # work per slice, quanta
    charge: npt.NDArray[np.int64]  # budget per slice, quanta
    gain: npt.NDArray[np.int64]  # objective coefficient
    allocated: npt.NDArray[np.bool_]
    urgent: npt.NDArray[np.int64]
    node_pools: list[int]  # pools where some class needs whole nodes


def _queued_starts(epoch: Epoch, ranks: Ranks) -> _Starts:
    """Every queued class's start variables (``x``) and their coefficients."""
    S = epoch.slices
    # lowest[p, a, n - 1]: the fewest GPUs pool p has in slices a .. a + n - 1.
    lowest = np.zeros((len(epoch.pools), S, S), dtype=np.int64)
    for pool in epoch.pools:
        cap = [pool.capacity(k) for k in range(S)]
        for k in range(S):
            for n in range(1, S - k + 1):
                lowest[pool.index, k, n - 1] = min(cap[k : k + n])
    # One row per (class, allowed pool): what a member takes and earns there.
    shapes: dict[tuple[int, int, bool, bool], tuple[int, int, int, int, int, int]] = {}
    node_pools: list[int] = []
    pairs: list[tuple[int, ...]] = []
    for i, c in enumerate(epoch.classes):
        bonus = _class_bonus(epoch, ranks, c)
        for p in c.pools:
            key = (p, c.gpus, c.urgent, c.resuming)
            if key not in shapes:
                shapes[key] = _member_shape(epoch, epoch.pools[p], c)
            shape = shapes[key]
            if shape[2] and p not in node_pools:
                node_pools.append(p)
            pairs.append((i, p, *shape, bonus, c.run, len(c.jobs), int(c.allocated) + 2 * int(c.urgent)))
    cols = np.array(pairs, dtype=np.int64).reshape(len(pairs), 12).T
    cls, pool_of, taken, wq, whole, gpus, charge, resume, per_q, run, members, flags = cols
    a = np.arange(S, dtype=np.int64)
    span = np.minimum(run[:, None], S - a[None, :])
    room = lowest[pool_of[:, None], a[None, :], span - 1] // taken[:, None]
    pair, start = np.nonzero(room > 0)  # row-major: pairs in order, slices ascending
    span = span[pair, start]
    return _Starts(
        var_cls=cls[pair],
        var_pool=pool_of[pair],
        var_start=start.astype(np.int64),
        span=span,
        ub=np.minimum(members[pair], room[pair, start]),
        gpus=gpus[pair],
        whole=whole[pair],
        wq=wq[pair],
        charge=charge[pair],
        gain=span * (WORK_BONUS * wq[pair] + per_q[pair] * wq[pair]) - resume[pair],
        allocated=(flags[pair] & 1).astype(bool),
        urgent=flags[pair] >> 1,
        node_pools=node_pools,
    )


def _member_shape(epoch: Epoch, pool: SubPool, c: JobClass) -> tuple[int, int, int, int, int, int]:
    """What one member of ``c`` started on ``pool`` takes and costs per slice: GPUs
    taken, work (quanta), whole nodes to itself, GPUs in the capacity rows, charge
    (quanta), and the cost of resuming."""
    taken = pool.taken(c.gpus)
    wq = epoch.work_q(c.gpus, pool)
    multi = pool.multi(c.gpus)
    # Whole nodes it needs to itself: all of a multi-node gang's, and one for a
    # single-node gang of more than half a node (two cannot share a node); a gang that
    # needs a node to itself counts the whole node.
    whole = taken // pool.gpus_per_node if multi else int(2 * c.gpus > pool.gpus_per_node)
    gpus = taken if multi or not whole else pool.gpus_per_node
    resume = _resume_cost(epoch, wq) if c.resuming else 0
    return taken, wq, whole, gpus, epoch.charge_of(wq, c.urgent), resume


def _first_touch_groups(keys: npt.NDArray[np.int64]) -> list[npt.NDArray[np.int64]]:
    """The positions of each key's entries, in order; keys in the order they first
    appear (as a loop that appends to ``dict.setdefault(key, [])`` would make them)."""
    if not len(keys):
        return []
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable")
    groups = np.split(order, np.cumsum(np.bincount(inverse))[:-1])
    return [groups[g] for g in np.argsort(first, kind="stable")]


def _capped_work_cuts(
    f: Formulation,
    funded_terms: dict[tuple[str, bool], list[tuple[int, int]]],
    funded_pieces: dict[str, list[int]],
    work_terms: dict[str, list[tuple[int, int]]],
    fixed_pieces: dict[str, list[int]],
) -> None:
    """Charged work in a project's first utility segments, capped per run.

    The first ``t`` segments hold ``min(charged, E_t)`` quanta (``E_t`` the end of
    segment ``t``), and ``min(a + b, E) <= min(a, E) + min(b, E)``: so they hold at most
    the sum over runs of each run's work capped at ``E_t``. Integer solutions meet it;
    the LP relaxation, which could take a quarter of a 64-GPU gang to fill a small
    project's steepest segment, no longer can. The same holds for uncharged work inside
    the share (``f + u0 + u1 <= min(work, T)``).
    """
    m = f.model
    epoch = f.epoch
    for project in sorted({p for p, _ in f.w}):
        tv, tq = _split_terms([t for u in (False, True) for t in funded_terms.get((project, u), [])])
        pieces = funded_pieces.get(project, [])
        largest = max(int(tq.max(initial=0)), max(pieces, default=0))
        ends = segment_ends(epoch, project)
        for t, end in enumerate(ends):
            segs = [f.u[(project, s)] for s in range(t + 1) if (project, s) in f.u]
            if not segs or end <= 0:
                continue
            if largest <= end:
                continue  # nothing capped: implied by the funded and utility rows
            rhs = sum(min(q, end) for q in pieces)
            m.add_row(
                np.concatenate((np.array(segs, dtype=np.int64), tv)),
                np.concatenate((np.ones(len(segs), dtype=np.int64), -np.minimum(tq, end))),
                "<=", rhs, f"cut_work[{project},{t}]",
            )
            f.work_rows.append((len(m.constraints) - 1, end))
    for project, fv in f.f.items():
        target = epoch.target_q.get(project, 0)
        tv, tq = _split_terms(work_terms.get(project, []))
        pieces = fixed_pieces.get(project, [])
        if max(int(tq.max(initial=0)), max(pieces, default=0)) <= target:
            continue
        head = [fv] + [f.u[(project, s)] for s in (0, 1) if (project, s) in f.u]
        m.add_row(
            np.concatenate((np.array(head, dtype=np.int64), tv)),
            np.concatenate((np.ones(len(head), dtype=np.int64), -np.minimum(tq, target))),
            "<=", sum(min(q, target) for q in pieces), f"cut_free[{project}]",
        )
        f.work_rows.append((len(m.constraints) - 1, target))


def _pairs(variables: npt.NDArray[np.int64], coefs: npt.NDArray[np.int64]) -> list[tuple[int, int]]:
    """Terms ``(var, coef)`` from an array of variables and one of coefficients."""
    return list(zip(variables.tolist(), coefs.tolist(), strict=True))


def _split_terms(terms: list[tuple[int, int]]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Terms ``(var, coef)`` as an array of variables and one of coefficients."""
    flat = np.array(terms, dtype=np.int64).reshape(len(terms), 2)
    return flat[:, 0].copy(), flat[:, 1].copy()


def _node_cuts(
    f: Formulation,
    node_terms: dict[tuple[int, int], list[tuple[int, int]]],
    node_fixed: dict[tuple[int, int], int],
    node_pools: set[int],
) -> None:
    """Node-count cuts per pool, slice and gang shape (Chvatal-Gomory roundings).

    The whole-node row of a pool and slice says ``sum(n_c * x_c) <= R``. Divided by a
    gang shape's node count ``n`` and rounded down, ``sum(floor(n_c / n) * x_c) <=
    floor(R / n)`` holds for integer ``x``: no more gangs of ``n`` nodes or larger start
    than fit whole. When ``R`` is not a multiple of ``n`` it cuts off LP points, such as
    1.5 gangs of 2 nodes on 3 free nodes.
    """
    m = f.model
    epoch = f.epoch
    for (p, k), terms in sorted(node_terms.items()):
        if p not in node_pools:
            continue
        room = epoch.pools[p].open_nodes(k) - node_fixed.get((p, k), 0)
        if room <= 0:
            continue
        # Each variable once, its nodes summed, in the order the row first names it.
        tv, tc = _split_terms(terms)
        unique, first, inverse = np.unique(tv, return_index=True, return_inverse=True)
        nodes = np.zeros(len(unique), dtype=np.int64)
        np.add.at(nodes, inverse.reshape(-1), tc)
        order = np.argsort(first, kind="stable")
        tv, tc = unique[order], nodes[order]
        for n in np.unique(tc[tc >= 2]).tolist():
            if room % n == 0:
                continue  # implied by the row itself
            big = tc >= n
            m.add_row(tv[big], tc[big] // n, "<=", room // n, f"cut_nodes[{p},{k},{n}]")


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


def _class_bonus(epoch: Epoch, ranks: Ranks, c: JobClass) -> int:
    """Priority, urgent and aging bonus of a class, per quantum."""
    bonus = round(PRIORITY_BONUS * ranks.get((c.project, c.priority), 0.0))
    if c.urgent:
        bonus += URGENT_BONUS
    multi = any(epoch.pools[p].multi(c.gpus) for p in c.pools)
    bonus += AGING_BONUS * c.aging * (2 if multi else 1)
    return bonus


def _preempt_cost(epoch: Epoch, job: Job, wq: int, progress: float) -> int:
    lost = epoch.snapshot.policy.restart_overhead if job.resumable else progress
    return max(round(BASE * preempt_slices(epoch.slice_len, lost) * wq), 1)


def _resume_cost(epoch: Epoch, wq: int) -> int:
    return round(BASE * epoch.snapshot.policy.restart_overhead / epoch.slice_len * wq)


def invert(f: Formulation, values: npt.NDArray[np.int64]) -> tuple[dict[str, int], list[Start]]:
    """Read the solver's values back: each running job's end slice and the starts.

    Within a class the oldest members take the earliest starts. Which slices are charged
    is settled after placement (:func:`planner.mip.assemble.charge_runs`).
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
    by_class: dict[int, list[tuple[int, int, int]]] = {}
    table = f.start_table()
    started = np.asarray(values)[table.var].astype(np.int64)  # truncated, as int() would
    some = np.flatnonzero(started > 0)
    for c, p, a, n in zip(
        table.cls[some].tolist(),
        table.pool[some].tolist(),
        table.start[some].tolist(),
        started[some].tolist(),
        strict=True,
    ):
        by_class.setdefault(c, []).append((a, p, n))
    for c_index, picks in by_class.items():
        members = iter(epoch.classes[c_index].jobs)
        for a, p, n in sorted(picks):
            for _ in range(n):
                starts.append(Start(next(members), p, a))
    return ends, starts


def within_classes(
    f: Formulation, values: npt.NDArray[np.int64], fallback: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """``values`` with the starts of each class that starts more jobs than it has
    members taken from ``fallback`` (which keeps within them): two answers merged
    variable by variable (the two searches of a pair) can both have moved one class."""
    table = f.start_table()
    if not len(table.var):
        return values
    members = np.array([len(c.jobs) for c in f.epoch.classes], dtype=np.int64)
    started = np.bincount(table.cls, weights=values[table.var], minlength=len(members))
    over = np.flatnonzero(started > members)
    if not len(over):
        return values
    out = values.copy()
    rows = table.var[np.isin(table.cls, over)]
    out[rows] = fallback[rows]
    return out


def round_lp(f: Formulation, lp_values: npt.NDArray[np.float64], up: float) -> npt.NDArray[np.int64]:
    """Round an LP optimum's job decisions to integers a placement can take.

    Every value is rounded down, then each start or running slice whose fractional part
    is at least ``up`` is rounded up, largest part first, while its class keeps within
    its members (``count[c]``). Capacity is not checked: placement drops what finds no
    hole, and the fill then uses what rounding down left free. ``up > 1`` rounds
    everything down. The auxiliary variables (charging, utility) are rounded down too;
    :func:`values_of_runs` recomputes them from the placed runs.
    """
    values = np.floor(lp_values + 1e-6).astype(np.int64)
    if up > 1:
        return values
    table = f.start_table()
    started = np.zeros(len(f.epoch.classes), dtype=np.int64)
    np.add.at(started, table.cls, values[table.var])
    parts = lp_values[table.var] - values[table.var]
    by_class: dict[int, list[tuple[float, int]]] = {}
    ups = np.flatnonzero(parts >= up - 1e-9)
    for c, part, var in zip(table.cls[ups].tolist(), parts[ups].tolist(), table.var[ups].tolist(), strict=True):
        by_class.setdefault(c, []).append((part, var))
    for c, cands in by_class.items():
        room = len(f.epoch.classes[c].jobs) - int(started[c])
        for _, var in sorted(cands, reverse=True)[: max(room, 0)]:
            values[var] += 1
    if f.z:
        zs = np.fromiter(f.z.values(), dtype=np.int64, count=len(f.z))
        values[zs[lp_values[zs] - values[zs] >= up - 1e-9]] = 1
    return values


def charge_counts(f: Formulation, values: npt.NDArray[np.int64]) -> dict[tuple[str, bool, int], int]:
    """The charged-slice counts of an answer: (project, urgent, work per slice) -> slices.

    :func:`~planner.mip.assemble.charge_runs` charges these, so the plan charges what
    the model did.
    """
    return {key: int(values[var]) for key, var in f.y.items() if values[var] > 0}


def values_of_runs(f: Formulation, runs: list[Run]) -> npt.NDArray[np.int64] | None:
    """The model's variables for a placed plan (``None`` if the model cannot express it).

    Charged work is what the runs' ``charged`` flags say
    (:func:`~planner.mip.assemble.charge_runs`: whole run-slices within the headroom),
    as the model counts it, so the objective of these values is the plan's own.
    """
    epoch = f.epoch
    m = f.model
    values = np.zeros(m.num_vars, dtype=np.int64)
    by_id = {r.state.job.id: r for r in runs}
    for (j, k), var in f.z.items():
        run = by_id.get(epoch.running[j].id)
        values[var] = int(run is not None and run.running and k < run.last)
    class_of = {st.job.id: c for c in epoch.classes for st in c.jobs}
    work: dict[str, int] = {}
    counts: dict[tuple[str, bool, int], int] = {}
    for run in runs:
        job = run.state.job
        wq = epoch.work_q(job.gpus, epoch.pools[run.pool])
        work[job.project] = work.get(job.project, 0) + (run.last - run.first) * wq
        if job.allocated and any(run.charged):
            key = (job.project, job.urgent, wq)
            counts[key] = counts.get(key, 0) + sum(run.charged)
        if run.running:
            continue
        x_var = f.x.get((class_of[job.id].index, run.pool, run.first))
        if x_var is None:
            return None
        values[x_var] += 1
    # A node is busy in slice k while a running job on it runs: k below the latest end.
    held: dict[str, int] = {}
    for r in runs:
        if r.running:
            for node in r.nodes:
                held[node] = max(held.get(node, 0), r.last)
    for (node, k), var in f.busy.items():
        values[var] = int(k < held.get(node, 0))
    charged: dict[str, int] = {}
    for key, n in counts.items():
        project, urgent, q = key
        w_var = f.w.get((project, urgent))
        if w_var is None:
            return None
        y = f.y.get(key)
        if y is not None:
            values[y] = n
        values[w_var] += q * n
        charged[project] = charged.get(project, 0) + q * n
    total_charged = dict(charged)
    within: dict[str, int] = {}
    for (project, s), var in sorted(f.u.items()):
        take = min(charged.get(project, 0), m.upper[var])
        values[var] = take
        charged[project] = charged.get(project, 0) - take
        if s < 2:
            within[project] = within.get(project, 0) + take
    for project, var in f.f.items():
        free = work.get(project, 0) - total_charged.get(project, 0)
        values[var] = max(min(free, m.upper[var] - within.get(project, 0)), 0)
    if m.violations(values):
        return None
    return values


def hint_from_runs(f: Formulation, runs: list[Run]) -> dict[int, int]:
    """A complete warm start equal to a placed (feasible) plan such as the greedy one."""
    values = values_of_runs(f, runs)
    if values is None:
        return {}
    return {i: int(v) for i, v in enumerate(values)}


def _drain_capacity(f: Formulation, st: _Starts, xvars: npt.NDArray[np.int64]) -> None:
    """Capacity rows for the starts that must keep off nodes that are open now: placement
    never puts a start on a node drained in any slice of its run, nor (with a contract)
    on one whose window opens within it (:meth:`~planner.mip.epoch.SubPool.keeps_off`,
    docs/formulation.md, Drained nodes). So in slice ``k`` the starts kept off a set of
    nodes share the other open nodes with the running jobs on them. The sets are nested
    by when each open node next closes (its next drained slice, or its next window);
    a start is counted when every member of its class keeps off every node of the set
    (the member with the shortest contract decides). The per-slice ``capacity`` rows
    count those nodes too: a start the model fits there finds no hole when placed."""
    epoch, m = f.epoch, f.model
    S = epoch.slices
    for pool in epoch.pools:
        if not pool.maintained:
            continue
        p = pool.index
        on_pool = [(j, r) for j, r in enumerate(epoch.running) if r.pool == p]
        mine = np.flatnonzero(st.var_pool == p)
        guard = {
            int(c): min(drain_guard(js.job, True, js.remaining) for js in epoch.classes[int(c)].jobs)
            for c in np.unique(st.var_cls[mine])
        }
        for k in range(S):
            open_k = [n for n in pool.nodes if n not in pool.drained[k]]
            closes = {n: _next_close(pool, n, k, epoch) for n in open_k}
            active = mine[(st.var_start[mine] <= k) & (st.var_start[mine] + st.span[mine] > k)]
            for i, t in enumerate(sorted(set(closes.values()) - {np.inf})):
                shut = [n for n in open_k if closes[n] <= t]
                keep = [n for n in open_k if closes[n] > t]
                # One node of each kind (the same drained slices and windows) asks for all.
                kinds = list({(tuple(n in d for d in pool.drained), pool.drain_opens.get(n, ())): n for n in shut}.values())
                off = [
                    v for v in active.tolist()
                    if all(
                        pool.keeps_off(
                            n, int(st.var_start[v]), int(st.var_start[v] + st.span[v]),
                            epoch.slice_start(int(st.var_start[v])), guard[int(st.var_cls[v])],
                        )
                        for n in kinds
                    )
                ]
                if not off:
                    continue
                at = np.array(off, dtype=np.int64)
                terms = list(_pairs(xvars[at], st.gpus[at]))
                fixed = 0
                kept = set(keep)
                for j, r in on_pool:
                    if k >= r.may:
                        continue
                    held_nodes = [n for n in r.state.nodes if n in kept]
                    if not held_nodes:
                        continue
                    held = pool.held(r.state.job.gpus, len(held_nodes))
                    var = f.z.get((j, k))
                    if var is None:
                        fixed += held
                    else:
                        terms.append((var, held))
                cap = len(keep) * pool.gpus_per_node - fixed
                m.add_constraint(terms, "<=", max(cap, 0), f"drain_capacity[{p},{k},{i}]")


def _next_close(pool: SubPool, node: str, k: int, epoch: Epoch) -> float:
    """When ``node`` (open in slice ``k``) next closes: the start of its next drained
    slice, or its next window's opening after slice ``k`` starts, whichever is first;
    infinity when neither comes."""
    after = epoch.slice_start(k)
    times = [epoch.slice_start(d) for d in range(k + 1, epoch.slices) if node in pool.drained[d]][:1]
    times += [w for w in pool.drain_opens.get(node, ()) if w > after]
    return float(min(times, default=np.inf))
