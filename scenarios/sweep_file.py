"""Sweep files (``SWEEP.yaml``): a base scenario, a grid, policies, seeds and days.

The shape (documented in ``docs/sweeps.md``)::

    base: ../tiny.yaml          # scenario file (relative to this file) or bundled name
    days: 2                     # simulated days; left out: the simulator's default
    policies: [fairshare, legacy]
    seeds: [1, 2, 3]            # only for a generated workload (workloads.generate)
    grid:                       # dotted path -> list of values; the sweep runs the product
      policy.lookback: [3d, 7d, 14d]
      org.research.share: [2, 3, 4]
    options: {}                 # simulator options; each policy gets those it takes
    out: lookback-results       # result folder, relative to this file (--out overrides;
                                # left out: <file stem>-results in the current folder)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from models.base import Count
from models.limits import MAX_DAYS, MAX_SEED
from scenarios.errors import ScenarioError, from_validation_error
from scenarios.load import bundled_scenarios, parse_yaml_mapping, read_text
from scenarios.sweep import (
    SchedulerUnreachable,
    SweepBase,
    SweepConfig,
    SweepError,
    SweepReport,
    run_sweep,
)


class SweepSpec(BaseModel):
    """The validated content of a sweep file."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    base: str = Field(min_length=1)
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    policies: list[str] = Field(default_factory=lambda: ["fairshare"], min_length=1)
    seeds: list[Count] | None = Field(default=None, min_length=1)
    days: float | None = Field(default=None, gt=0, le=MAX_DAYS)
    options: dict[str, Any] = Field(default_factory=dict)
    out: str | None = None

    @field_validator("grid")
    @classmethod
    def _non_empty(cls, grid: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for key, values in grid.items():
            if not values:
                raise ValueError(f"{key}: give at least one value")
        return grid

    @field_validator("out")
    @classmethod
    def _out_named(cls, out: str | None) -> str | None:
        if out is not None and not out.strip():
            # An empty folder name would put the results next to the sweep file.
            raise ValueError("must not be empty (leave it out for the default)")
        return out

    @field_validator("seeds")
    @classmethod
    def _seeds_in_range(cls, seeds: list[int] | None) -> list[int] | None:
        for i, seed in enumerate(seeds or ()):
            if not 0 <= seed <= MAX_SEED:
                raise ValueError(f"seeds[{i}]: a seed is a whole number from 0 to 2**63-1, got {seed}")
        return seeds

    @model_validator(mode="after")
    def _option_values(self) -> SweepSpec:
        for name, value in self.options.items():
            check_option(f"options.{name}", name, value)
        for key, values in self.grid.items():
            if key.startswith("options."):
                for i, value in enumerate(values):
                    check_option(f"grid.{key}[{i}]", key[len("options.") :], value)
        return self


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _positive(value: object) -> str | None:
    return None if _is_number(value) and value > 0 else "a positive number"  # type: ignore[operator]


def _non_negative(value: object) -> str | None:
    return None if _is_number(value) and value >= 0 else "a number of 0 or more"  # type: ignore[operator]


def _fraction(value: object) -> str | None:
    ok = _is_number(value) and 0 <= value <= 1  # type: ignore[operator]
    return None if ok else "a number from 0 to 1"


def _open_fraction(value: object) -> str | None:
    ok = _is_number(value) and 0 < value <= 1  # type: ignore[operator]
    return None if ok else "a number above 0, at most 1"


def _flag(value: object) -> str | None:
    return None if isinstance(value, bool) else "true or false"


def _seed(value: object) -> str | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SEED
    return None if ok else "a whole number from 0 to 2**63-1"


def _backend(value: object) -> str | None:
    return None if value in ("cpsat", "pulp") else "cpsat or pulp"


def _lanes(value: object) -> str | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    return None if ok else "a whole number of 1 or more"


def _fast_lane_keeps(value: object) -> str | None:
    from planner.scheduler.mip import FAST_LANE_KEEPS

    return None if value in FAST_LANE_KEEPS else ", ".join(FAST_LANE_KEEPS[:-1]) + " or " + FAST_LANE_KEEPS[-1]


#: What each simulator option takes; an option not listed is passed on unchecked.
OPTION_CHECKS: dict[str, Callable[[object], str | None]] = {
    "seed": _seed,
    "protected_fraction": _fraction,
    "backend": _backend,
    "time_limit": _positive,
    "rel_gap": _non_negative,
    "replan_slices": _flag,
    "fast_lane": _flag,
    "holds": _flag,
    "hold_fraction": _open_fraction,
    "fast_lane_keeps": _fast_lane_keeps,
    "lanes": _lanes,
}


def check_option(where: str, name: str, value: object) -> None:
    """Refuse a simulator option value of the wrong kind, naming ``where`` it is."""
    check = OPTION_CHECKS.get(name)
    problem = check(value) if check is not None else None
    if problem is not None:
        raise ValueError(f"{where}: expected {problem}, got {value!r}")


class SweepFile:
    """A loaded sweep file: its spec and the paths it names, resolved against it."""

    def __init__(self, path: Path, spec: SweepSpec) -> None:
        self.path = path
        self.spec = spec

    @property
    def base_path(self) -> Path:
        """The base scenario: relative to the sweep file, else a bundled scenario name."""
        candidate = self.path.parent / self.spec.base
        if candidate.exists():
            return candidate
        bundled = bundled_scenarios()
        if self.spec.base in bundled:
            return bundled[self.spec.base]
        raise ScenarioError(
            self.path, f"base: no scenario file {str(candidate)!r} (and no bundled scenario of that name)"
        )

    def out_dir(self, override: str | Path | None = None) -> Path:
        """``override``, else the file's ``out`` (relative to the sweep file), else
        ``<stem>-results`` in the current folder (never next to a bundled example)."""
        if override is not None:
            return Path(override)
        if self.spec.out is not None:
            return self.path.parent / self.spec.out
        return Path(f"{self.path.stem}-results")

    def run(
        self,
        *,
        out: str | Path | None = None,
        workers: int = 0,
        scheduler: str | None = None,
        progress: bool = False,
    ) -> SweepReport:
        """Run the sweep; errors in the grid or seeds name this file and the field."""
        base_path = self.base_path
        try:
            base = SweepBase.from_any(base_path)
        except ScenarioError as exc:
            raise ScenarioError(self.path, f"base: {exc}") from None
        try:
            return run_sweep(
                SweepConfig(
                    base=base,
                    grid=self.spec.grid,
                    policies=self.spec.policies,
                    seeds=self.spec.seeds,
                    days=self.spec.days,
                    options=self.spec.options,
                    out=self.out_dir(out),
                    workers=workers,
                    scheduler=scheduler,
                    progress=progress,
                )
            )
        except SchedulerUnreachable:
            raise  # about the --scheduler address, not this file
        except SweepError as exc:
            if exc.file is not None:
                raise
            raise SweepError(self.path, exc.message) from None


def load_sweep_file(path: str | Path) -> SweepFile:
    """Read and validate a sweep file. Raises :class:`ScenarioError` naming the field."""
    file = Path(path)
    data = parse_yaml_mapping(read_text(file), file, "a mapping with base, grid, policies...")
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as err:
        raise from_validation_error(err, file) from None
    return SweepFile(file, spec)
