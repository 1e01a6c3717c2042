"""A fluent builder of small snapshots for the planner tests.

``SnapBuilder().pool(nodes=2).project("a", owed=8).queued("a1", gpus=8).build()``
"""

from __future__ import annotations

from typing import Any

import pytest

from models import (
    DEFAULT_GPU_TYPES,
    Job,
    JobState,
    Node,
    NodeState,
    OrgUnit,
    Policy,
    ProjectStanding,
    Snapshot,
)


class SnapBuilder:
    """Pools of named nodes, flat projects with standings, queued and running jobs."""

    def __init__(
        self,
        *,
        now: float = 0.0,
        epoch: float = 3600.0,
        slices: int = 4,
        restart_overhead: float = 120.0,
        urgent_charge: float = 2.0,
    ) -> None:
        self.now = now
        self.policy = Policy(
            epoch=epoch,
            slices=slices,
            restart_overhead=restart_overhead,
            urgent_charge=urgent_charge,
        )
        self.nodes: list[NodeState] = []
        self.standing: dict[str, ProjectStanding] = {}
        self.jobs: list[JobState] = []

    def pool(
        self,
        cluster: str = "c",
        gpu_type: str = "H100",
        nodes: int = 1,
        gpus_per_node: int = 8,
        drain: tuple[float, float] | None = None,
        drained: int = 0,
        next_drain: float | None = None,
    ) -> SnapBuilder:
        """Add ``nodes`` nodes; the last ``drained`` of them drain over ``drain``, or
        (``next_drain``) have their next window open then, after the epoch."""
        for i in range(nodes):
            node = Node(
                name=f"{cluster}-{gpu_type.lower()}-{i:03d}",
                cluster=cluster,
                gpu_type=gpu_type,
                gpus=gpus_per_node,
            )
            if drain is not None and i >= nodes - drained:
                self.nodes.append(NodeState(node=node, drain_start=drain[0], drain_end=drain[1],
                                            next_drain=next_drain))
            elif next_drain is not None and i >= nodes - drained:
                self.nodes.append(NodeState(node=node, next_drain=next_drain))
            else:
                self.nodes.append(NodeState(node=node))
        return self

    def project(
        self, name: str, owed: float = 8.0, ratio: float = 1.0, headroom: float = 1e6
    ) -> SnapBuilder:
        self.standing[name] = ProjectStanding(
            project=name, owed_gpus=owed, ratio=ratio, deficit_gpu_h=0.0, headroom_gpu_h=headroom
        )
        return self

    def queued(self, id: str, project: str = "a", gpus: int = 8, **job: Any) -> SnapBuilder:
        job.setdefault("duration", 7200.0)
        job.setdefault("min_runtime", 3600.0)
        job.setdefault("submit", self.now)
        self.jobs.append(
            JobState(job=Job(id=id, project=project, gpus=gpus, **job), status="queued")
        )
        return self

    def running(
        self,
        id: str,
        nodes: tuple[str, ...],
        project: str = "a",
        gpus: int = 8,
        *,
        ran: float = 0.0,
        charged: bool = True,
        progress: float | None = None,
        **job: Any,
    ) -> SnapBuilder:
        """A job running on ``nodes`` for ``ran`` seconds already."""
        job.setdefault("duration", 36000.0)
        job.setdefault("min_runtime", 3600.0)
        job.setdefault("submit", self.now - ran)
        first = next(n.node for n in self.nodes if n.node.name == nodes[0])
        self.jobs.append(
            JobState(
                job=Job(id=id, project=project, gpus=gpus, **job),
                status="running",
                progress=ran if progress is None else progress,
                run_start=self.now - ran,
                cluster=first.cluster,
                gpu_type=first.gpu_type,
                nodes=nodes,
                charged=charged,
            )
        )
        return self

    def build(self) -> Snapshot:
        return Snapshot(
            now=self.now,
            policy=self.policy,
            gpu_types=dict(DEFAULT_GPU_TYPES),
            org=tuple(OrgUnit(name=p, share=1.0) for p in self.standing),
            nodes=tuple(self.nodes),
            jobs=tuple(self.jobs),
            standing=dict(self.standing),
        )


@pytest.fixture
def snap() -> type[SnapBuilder]:
    """The :class:`SnapBuilder` class."""
    return SnapBuilder
