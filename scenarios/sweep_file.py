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

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from scenarios.errors import ScenarioError, from_validation_error
from scenarios.load import bundled_scenarios, parse_yaml_mapping, read_text
from scenarios.sweep import SchedulerUnreachable, SweepBase, SweepError, SweepReport, run_sweep


class SweepSpec(BaseModel):
    """The validated content of a sweep file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base: str = Field(min_length=1)
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    policies: list[str] = Field(default_factory=lambda: ["fairshare"], min_length=1)
    seeds: list[int] | None = Field(default=None, min_length=1)
    days: float | None = Field(default=None, gt=0)
    options: dict[str, Any] = Field(default_factory=dict)
    out: str | None = None

    @field_validator("grid")
    @classmethod
    def _non_empty(cls, grid: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for key, values in grid.items():
            if not values:
                raise ValueError(f"{key}: give at least one value")
        return grid


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
                base,
                self.spec.grid,
                self.spec.policies,
                self.spec.seeds,
                days=self.spec.days,
                options=self.spec.options,
                out=self.out_dir(out),
                workers=workers,
                scheduler=scheduler,
                progress=progress,
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
