"""Maintenance: nodes of a cluster drained from a time, for a duration."""

from __future__ import annotations

from pydantic import Field, model_validator

from models.base import Count, Input
from models.durations import Duration


class Maintenance(Input):
    """Drain ``nodes`` nodes (or the named ``node_names``) of ``cluster``.

    With a count, the nodes are taken from the end of the cluster's node list (of
    ``gpu_type`` when given), so the choice is deterministic.
    """

    cluster: str
    nodes: Count | None = Field(default=None, ge=1)
    node_names: tuple[str, ...] | None = Field(default=None, min_length=1)
    gpu_type: str | None = None
    start: Duration = Field(ge=0)
    duration: Duration = Field(gt=0)

    @model_validator(mode="after")
    def _one_selector(self) -> Maintenance:
        if (self.nodes is None) == (self.node_names is None):
            raise ValueError("give exactly one of 'nodes' (a count) or 'node_names'")
        if self.node_names is not None and self.gpu_type is not None:
            raise ValueError("'gpu_type' picks nodes for a count: with 'node_names' leave it out")
        return self

    @property
    def end(self) -> float:
        return self.start + self.duration
