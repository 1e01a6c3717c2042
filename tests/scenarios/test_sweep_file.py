"""Sweep files: bad option values, seeds and days name the sweep file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.cli import main
from scenarios import ScenarioError
from scenarios.sweep_file import OPTION_CHECKS, load_sweep_file


def _error(tmp_path: Path, body: str) -> str:
    path = tmp_path / "sweep.yaml"
    path.write_text("base: tiny\n" + body)
    with pytest.raises(ScenarioError) as info:
        load_sweep_file(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    return message.removeprefix(f"{path}: ")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("policies: [mip]\noptions: {time_limit: abc}\n", "options.time_limit: expected a positive number, got 'abc'"),
        ("policies: [mip]\noptions: {time_limit: .nan}\n", "options.time_limit: expected a positive number, got nan"),
        ("policies: [mip]\noptions: {holds: 3}\n", "options.holds: expected true or false, got 3"),
        ("policies: [mip]\noptions: {backend: gurobi}\n", "options.backend: expected cpsat or pulp"),
        ("policies: [mip]\noptions: {fast_lane_keeps: all}\n",
         "options.fast_lane_keeps: expected funded, gangs or none, got 'all'"),
        ("policies: [legacy]\noptions: {seed: -1}\n", "options.seed: expected a whole number from 0"),
        ("policies: [legacy]\noptions: {protected_fraction: 2}\n", "options.protected_fraction: expected a number from 0 to 1"),
        ("policies: [mip]\ngrid: {options.hold_fraction: [0.5, 0]}\n",
         "grid.options.hold_fraction[1]: expected a number above 0, at most 1, got 0"),
        ("seeds: [1, -2]\n", "seeds: seeds[1]: a seed is a whole number from 0 to 2**63-1, got -2"),
        ("seeds: [true]\n", "seeds[0]: expected a number, got true"),
        ("days: .inf\n", "days: Input should be a finite number"),
        ("days: 100000\n", "days: Input should be less than or equal to 3650"),
    ],
)
def test_bad_sweep_values_name_the_file_and_field(tmp_path: Path, body: str, message: str) -> None:
    """Values the simulator would choke on (TypeError/ValueError) are refused up front."""
    assert message in _error(tmp_path, body)


def test_every_checked_option_is_one_the_simulator_takes() -> None:
    """The option checks cover only real simulator options (no stale names)."""
    from planner.scheduler import OPTIONS

    taken = {name for names in OPTIONS.values() for name in names}
    assert set(OPTION_CHECKS) <= taken


def test_a_duplicate_key_in_a_sweep_file_is_refused(tmp_path: Path) -> None:
    """Sweep files use the same strict YAML reader as scenarios."""
    assert "duplicate key 'days'" in _error(tmp_path, "days: 1\ndays: 2\n")


def test_cli_reports_a_bad_sweep_option_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`gpuplan sweep` exits 2 with the file and the field, before running any point."""
    path = tmp_path / "sweep.yaml"
    path.write_text("base: tiny\npolicies: [mip]\noptions: {time_limit: -3}\n")
    assert main(["sweep", str(path), "--workers", "0", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"{path}: options.time_limit: expected a positive number, got -3" in err
    assert not (tmp_path / "out").exists()
