"""The scheduling policy's knobs."""

from __future__ import annotations

from pydantic import Field, model_validator

from models.base import Frozen
from models.durations import Duration


class Policy(Frozen):
    """Epoch length, slicing, fair-share lookback and the contract's limits."""

    epoch: Duration = 3600.0
    slices: int = Field(default=4, ge=1, le=96)
    lookback: Duration = 7 * 86400.0
    max_min_runtime: Duration = 8 * 3600.0
    urgent_charge: float = Field(default=2.0, ge=1.0)
    restart_overhead: Duration = 120.0

    @model_validator(mode="after")
    def _check(self) -> Policy:
        if self.epoch <= 0:
            raise ValueError("epoch must be positive")
        if self.lookback <= 0:
            raise ValueError("lookback must be positive")
        if self.max_min_runtime < 0 or self.restart_overhead < 0:
            raise ValueError("max_min_runtime and restart_overhead must not be negative")
        return self

    @property
    def slice_length(self) -> float:
        """Seconds in one slice of an epoch."""
        return self.epoch / self.slices
