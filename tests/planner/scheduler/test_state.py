"""Mutable simulation state: nodes and their free GPUs."""

from __future__ import annotations

from models import Cluster, Job, NodeGroup, OrgUnit, Scenario, Workloads
from planner.scheduler.state import ClusterState


def _cluster() -> ClusterState:
    return ClusterState(Scenario(
        name="state",
        clusters=(Cluster(name="alpha", node_groups=(NodeGroup(gpu_type="H100", nodes=2),)),),
        org=(OrgUnit(name="a", share=1),),
        workloads=Workloads(jobs=()),
    ))


def test_version_moves_with_free_gpus_and_drains() -> None:
    """Taking or giving GPUs, draining and undraining a node each move ``version``."""
    cl = _cluster()
    name = next(iter(cl.nodes))
    seen = [cl.version]
    cl.take((name,), 4, 0)
    seen.append(cl.version)
    cl.give((name,), 4, 0)
    seen.append(cl.version)
    cl.drain(name)
    seen.append(cl.version)
    cl.undrain(name)
    seen.append(cl.version)
    assert seen == sorted(set(seen))


def test_grown_moves_only_when_gpus_come_back() -> None:
    """``grown`` (what a placement's no-hole memo is keyed on) stays put when GPUs are
    taken or a node is drained, which never opens a hole, and moves when GPUs are given
    back or a node is undrained."""
    cl = _cluster()
    name = next(iter(cl.nodes))
    start = cl.grown
    cl.take((name,), 4, 0)
    cl.drain(name)
    assert cl.grown == start
    cl.undrain(name)
    assert cl.grown == start + 1
    cl.give((name,), 4, 0)
    assert cl.grown == start + 2


def test_uniform_pools_tells_one_node_size_from_several() -> None:
    """A job whose pools all have one node size is on uniform pools; a mixed pool is not."""
    mixed = ClusterState(Scenario(
        name="mixed",
        clusters=(Cluster(name="alpha", node_groups=(
            NodeGroup(gpu_type="H100", nodes=1, gpus_per_node=4),
            NodeGroup(gpu_type="H100", nodes=1, gpus_per_node=8),
        )),),
        org=(OrgUnit(name="a", share=1),),
        workloads=Workloads(jobs=()),
    ))
    job = Job(id="j", project="a", gpus=8)
    assert _cluster().uniform_pools(job)
    assert not mixed.uniform_pools(job)


def test_a_pools_free_gpus_follow_takes_gives_and_drains() -> None:
    """``free_gpus`` is the free GPUs of the pool's non-drained nodes (16 on two idle
    8-GPU nodes): a take or a drain takes them off, a give or an undrain puts them back."""
    cl = _cluster()
    (ps,) = cl.pools.values()
    a, b = sorted(cl.nodes)
    assert ps.free_gpus == 16
    cl.take((a,), 3, 0)
    assert ps.free_gpus == 13
    cl.drain(a)  # its 5 free GPUs leave the pool's count
    assert ps.free_gpus == 8
    cl.give((a,), 3, 0)  # a drained node's GPUs stay out
    assert ps.free_gpus == 8
    cl.undrain(a)
    assert ps.free_gpus == 16 == sum(ps.open_free.values())
    cl.take((a, b), 8, 1)
    assert ps.free_gpus == 0
