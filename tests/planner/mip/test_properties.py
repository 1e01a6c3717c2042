"""Invariants of every plan, on random small snapshots (hypothesis, derandomized)."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from models import Plan, Snapshot
from planner.mip import plan_epoch
from planner.mip.backends import Capabilities
from planner.placement import nodes_needed, place_gang

from .conftest import SnapBuilder

SLICE = 900.0


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    """1-2 pools of 1-3 nodes, up to 3 projects, running jobs placed on real holes."""
    b = SnapBuilder(now=7200.0)
    pools = draw(st.lists(st.sampled_from([("c", "H100", 8), ("d", "B200", 8), ("e", "H100", 4)]), min_size=1, max_size=2, unique=True))
    for cluster, gpu_type, gpn in pools:
        nodes = draw(st.integers(1, 3))
        drained = draw(st.integers(0, 1))
        start = draw(st.sampled_from([7200.0, 8100.0, 9000.0]))
        b.pool(cluster, gpu_type, nodes=nodes, gpus_per_node=gpn, drain=(start, start + 7200.0), drained=drained)
    projects = ["a", "b", "c"][: draw(st.integers(1, 3))]
    for p in projects:
        b.project(
            p,
            owed=draw(st.sampled_from([0.0, 4.0, 8.0, 16.0])),
            ratio=draw(st.sampled_from([0.0, 0.5, 1.0, 2.0])),
            headroom=draw(st.sampled_from([0.0, 2.0, 6.0, 1000.0])),
        )
    free = {n.node.name: n.node.gpus for n in b.nodes}
    size = dict(free)
    by_pool: dict[str, list[str]] = {}
    for n in b.nodes:
        by_pool.setdefault(n.node.cluster, []).append(n.node.name)
    for i in range(draw(st.integers(0, 3))):
        cluster = draw(st.sampled_from(sorted(by_pool)))
        gpus = draw(st.sampled_from([1, 2, 4, 8, 16]))
        names = by_pool[cluster]
        nodes = place_gang({n: free[n] for n in names if free[n] > 0}, size, gpus)
        if nodes is None:
            continue
        per = size[nodes[0]] if len(nodes) > 1 else gpus
        for n in nodes:
            free[n] -= per
        b.running(
            f"r{i}",
            nodes,
            draw(st.sampled_from(projects)),
            gpus,
            ran=draw(st.sampled_from([300.0, 1800.0, 5400.0])),
            duration=draw(st.sampled_from([3600.0, 7200.0, 36000.0])) + 5400.0,
            min_runtime=draw(st.sampled_from([0.0, 900.0, 3600.0, 7200.0])),
            resumable=draw(st.booleans()),
            charged=draw(st.booleans()),
        )
    for i in range(draw(st.integers(0, 6))):
        gpus = draw(st.sampled_from([1, 2, 3, 4, 8, 12, 16]))
        cluster, gpu_type, gpn = draw(st.sampled_from(pools))
        count = sum(1 for n in b.nodes if n.node.cluster == cluster)
        if nodes_needed(gpus, gpn) > count:
            continue
        b.queued(
            f"q{i}",
            draw(st.sampled_from(projects)),
            gpus,
            clusters=(cluster,),
            duration=draw(st.sampled_from([600.0, 1800.0, 3600.0, 20000.0])),
            min_runtime=draw(st.sampled_from([0.0, 600.0, 1800.0, 3600.0])),
            resumable=draw(st.booleans()),
            urgent=draw(st.booleans()),
            priority=draw(st.integers(-1, 2)),
            submit=draw(st.sampled_from([0.0, 3600.0, 7200.0])),
        )
    return b.build()


def check_plan(snapshot: Snapshot, plan: Plan) -> None:
    """Every invariant the issue names, on one plan."""
    nodes = {n.node.name: n for n in snapshot.nodes}
    states = {s.job.id: s for s in snapshot.jobs}
    where: dict[str, list[tuple[int, tuple[str, ...], str, str]]] = {}
    for k, sl in enumerate(plan.slices):
        used: dict[str, int] = {}
        seen: set[str] = set()
        for a in sl.assignments:
            assert a.job not in seen, "a job appears twice in one slice"
            seen.add(a.job)
            job = states[a.job].job
            assert a.gpus == job.gpus
            size = nodes[a.nodes[0]].node.gpus
            # Gangs are whole: one node when it fits one, else whole nodes of one pool.
            assert len(a.nodes) == nodes_needed(job.gpus, size)
            assert len(set(a.nodes)) == len(a.nodes)
            for n in a.nodes:
                node = nodes[n].node
                assert (node.cluster, node.gpu_type) == (a.cluster, a.gpu_type)
                assert job.allows(node.cluster, node.gpu_type)
                used[n] = used.get(n, 0) + (node.gpus if len(a.nodes) > 1 else job.gpus)
            where.setdefault(a.job, []).append((k, a.nodes, a.cluster, a.gpu_type))
        for n, g in used.items():
            assert g <= nodes[n].node.gpus, f"node {n} oversubscribed in slice {k}"
    for job_id, runs in where.items():
        ks = [k for k, *_ in runs]
        # One contiguous run, on the same nodes of one pool, for the whole epoch.
        assert ks == list(range(ks[0], ks[-1] + 1))
        assert len({r[1:] for r in runs}) == 1
        state = states[job_id]
        if state.status == "queued":
            for k, ns, *_ in runs:
                s0, s1 = plan.slices[k].start, plan.slices[k].end
                for n in ns:
                    ns_state = nodes[n]
                    overlaps = ns_state.drain_start is not None and ns_state.drain_start < s1 and (
                        ns_state.drain_end is None or ns_state.drain_end > s0
                    )
                    assert not overlaps, "new work on a drained node"
            # A new start runs to completion or to the epoch's end.
            rest = state.remaining
            need = len(plan.slices) - ks[0] if rest is None else min(math.ceil(rest / SLICE - 1e-9), len(plan.slices) - ks[0])
            assert len(ks) >= need
    for state in snapshot.jobs:
        if state.status != "running":
            continue
        runs = where.get(state.job.id, [])
        ks = [k for k, *_ in runs]
        assert not ks or ks[0] == 0, "a running job that continues does so from the start"
        for _, ns, *_ in runs:
            assert ns == state.nodes, "a running job keeps its nodes"
        if state.charged:
            left = max(state.contract_end - snapshot.now, 0.0)
            finish = len(plan.slices) if state.remaining is None else min(math.ceil(state.remaining / SLICE - 1e-9), len(plan.slices))
            contract = finish if not state.job.resumable else min(math.ceil(left / SLICE - 1e-9), finish)
            assert len(ks) >= contract, f"{state.job.id} cut inside its contract"
    # Budgets: charged work within each project's headroom.
    for p in plan.projects:
        head = snapshot.standing[p.project].headroom_gpu_h if p.project in snapshot.standing else 0.0
        assert p.charged_gpu_h <= head + 1e-6
    # Every queued job is placed or pending, not both.
    pending = {p.job for p in plan.pending}
    for state in snapshot.jobs:
        if state.status == "queued":
            assert (state.job.id in where) != (state.job.id in pending), state.job.id
    # The JSON round-trips.
    assert Plan.model_validate_json(plan.model_dump_json()) == plan


@settings(derandomize=True, max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots())
def test_plans_keep_every_invariant(snapshot: Snapshot) -> None:
    """Capacity and nodes are never oversubscribed, gangs whole, contracts and budgets kept."""
    plan = plan_epoch(snapshot, time_limit=5.0)
    check_plan(snapshot, plan)


@settings(derandomize=True, max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots())
def test_pulp_plans_keep_every_invariant(snapshot: Snapshot) -> None:
    """The PuLP backend's plans keep the same invariants."""
    check_plan(snapshot, plan_epoch(snapshot, backend="pulp", time_limit=5.0))


@settings(derandomize=True, max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots())
def test_greedy_fallback_keeps_every_invariant(snapshot: Snapshot) -> None:
    """The greedy fallback plan is valid too."""
    plan = plan_epoch(snapshot, backend=FailingBackend(), time_limit=5.0)
    check_plan(snapshot, plan)


class FailingBackend:
    """A backend whose solver always errors."""

    name = "failing"
    capabilities = Capabilities()

    def is_available(self) -> bool:
        return True

    def solve(self, model: Any, *, time_limit: float, rel_gap: float) -> Any:
        raise RuntimeError("solver crashed")
