"""GPU types and their exchange rates in H100-equivalents."""

from __future__ import annotations

from pydantic import Field, field_validator

from models.base import Input, Number
from models.limits import MAX_RATE, MIN_RATE


class GpuType(Input):
    """A GPU type's rate: how many H100s one of its GPUs is worth for budgeting."""

    rate: Number = Field(gt=0, le=MAX_RATE)

    @field_validator("rate")
    @classmethod
    def _not_tiny(cls, rate: float) -> float:
        if rate < MIN_RATE:
            raise ValueError(f"must be at least {MIN_RATE:g}")
        return rate


DEFAULT_GPU_TYPES: dict[str, GpuType] = {
    "H100": GpuType(rate=1.0),
    "B200": GpuType(rate=2.0),
    "B300": GpuType(rate=2.6),
}
