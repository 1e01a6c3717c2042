"""Sweep files: bad option values, seeds and days name the sweep file and the field."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
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
        ("policies: [mip]\noptions: {lanes: 0}\n", "options.lanes: expected a whole number of 1 or more, got 0"),
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


def test_cli_refuses_an_empty_out_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``out: ""`` names no folder: exit 2 naming the file and the field, nothing written
    next to the sweep file."""
    path = tmp_path / "sweep.yaml"
    path.write_text('base: tiny\ndays: 0.05\nout: ""\n')
    assert main(["sweep", str(path), "--workers", "0", "--no-progress"]) == 2
    assert f"{path}: out: must not be empty" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweep.yaml"]


@pytest.mark.parametrize("name", ["results.csv", "results.parquet"])
def test_cli_reports_an_unwritable_result_file_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """A folder in the place of a combined file: exit 2, one line naming the folder and
    the file, no traceback."""
    path = tmp_path / "sweep.yaml"
    path.write_text("base: tiny\ndays: 0.05\ngrid: {policy.slices: [2, 4]}\n")
    out = tmp_path / "out"
    (out / name).mkdir(parents=True)
    assert main(["sweep", str(path), "--workers", "0", "--no-progress", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"gpuplan: error: {out}: cannot write {name}: it is a folder"


def test_cli_reports_a_scale_factor_that_overflows_as_a_failed_point(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``clusters.alpha.scale: .inf`` fails its own point (exit 1, the error in its row),
    not the whole sweep with a traceback."""
    path = tmp_path / "sweep.yaml"
    path.write_text("base: tiny\ndays: 0.05\ngrid: {clusters.alpha.scale: [.inf]}\n")
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--workers", "0", "--no-progress", "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert "1 points: 1 ran, 0 already done, 1 failed." in captured.out
    (error,) = pd.read_csv(out / "results.csv")["error"]
    assert error == "clusters.alpha.scale: expected a positive, finite scale factor, got inf"
