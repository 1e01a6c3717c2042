"""Clusters, node groups, nodes and pools."""

from __future__ import annotations

from typing import NamedTuple

from pydantic import Field

from models.base import Count, Frozen, Input
from models.limits import MAX_GPUS_PER_NODE, MAX_NODES_PER_GROUP


class Pool(NamedTuple):
    """A (cluster, GPU type) pair: the unit of capacity the planner assigns."""

    cluster: str
    gpu_type: str

    def __str__(self) -> str:
        return f"{self.cluster}/{self.gpu_type}"


class NodeGroup(Input):
    """Identical nodes of one GPU type inside a cluster."""

    gpu_type: str
    nodes: Count = Field(ge=1, le=MAX_NODES_PER_GROUP)
    gpus_per_node: Count = Field(default=8, ge=1, le=MAX_GPUS_PER_NODE)


class Node(Frozen):
    """One host with a stable name such as ``alpha-h100-003``."""

    name: str
    cluster: str
    gpu_type: str
    gpus: int

    @property
    def pool(self) -> Pool:
        return Pool(self.cluster, self.gpu_type)


class Cluster(Input):
    """A named cluster made of node groups."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    node_groups: tuple[NodeGroup, ...] = Field(min_length=1)

    def nodes(self) -> tuple[Node, ...]:
        """All nodes, named ``{cluster}-{gpu type}-{index:03d}`` per GPU type."""
        counters: dict[str, int] = {}
        out: list[Node] = []
        for group in self.node_groups:
            for _ in range(group.nodes):
                index = counters.get(group.gpu_type, 0)
                counters[group.gpu_type] = index + 1
                name = f"{self.name}-{group.gpu_type.lower()}-{index:03d}"
                out.append(
                    Node(name=name, cluster=self.name, gpu_type=group.gpu_type, gpus=group.gpus_per_node)
                )
        return tuple(out)

    def pools(self) -> tuple[Pool, ...]:
        seen: dict[Pool, None] = {}
        for group in self.node_groups:
            seen[Pool(self.name, group.gpu_type)] = None
        return tuple(seen)
