"""GPU types and their exchange rates in H100-equivalents."""

from __future__ import annotations

from pydantic import Field

from models.base import Frozen


class GpuType(Frozen):
    """A GPU type's rate: how many H100s one of its GPUs is worth for budgeting."""

    rate: float = Field(gt=0)


DEFAULT_GPU_TYPES: dict[str, GpuType] = {
    "H100": GpuType(rate=1.0),
    "B200": GpuType(rate=2.0),
    "B300": GpuType(rate=2.6),
}
