"""The scheduling policy's knobs."""

from __future__ import annotations

from pydantic import Field, model_validator

from models.base import Count, Input, Number
from models.durations import Duration
from models.limits import MAX_EPOCH_SECONDS, MAX_LOOKBACK_SECONDS, MAX_URGENT_CHARGE


class Policy(Input):
    """Epoch length, slicing, fair-share lookback and the contract's limits."""

    epoch: Duration = 3600.0
    slices: Count = Field(default=4, ge=1, le=96)
    lookback: Duration = 7 * 86400.0
    max_min_runtime: Duration = 8 * 3600.0
    urgent_charge: Number = Field(default=2.0, ge=1.0, le=MAX_URGENT_CHARGE)
    restart_overhead: Duration = 120.0
    #: A start whose contract would still protect it when its node's announced
    #: maintenance window opens takes other nodes, or waits (so drains never wait on a
    #: contract started in view of the window). Off: such starts go ahead, as in legacy.
    maintenance_fence: bool = True

    @model_validator(mode="after")
    def _check(self) -> Policy:
        if self.epoch <= 0:
            raise ValueError("epoch must be positive")
        if self.epoch > MAX_EPOCH_SECONDS:
            raise ValueError(f"epoch must be at most {MAX_EPOCH_SECONDS / 86400:g} days")
        if self.lookback <= 0:
            raise ValueError("lookback must be positive")
        if self.lookback > MAX_LOOKBACK_SECONDS:
            raise ValueError(f"lookback must be at most {MAX_LOOKBACK_SECONDS / 86400:g} days")
        if self.max_min_runtime < 0 or self.restart_overhead < 0:
            raise ValueError("max_min_runtime and restart_overhead must not be negative")
        return self

    @property
    def slice_length(self) -> float:
        """Seconds in one slice of an epoch."""
        return self.epoch / self.slices
