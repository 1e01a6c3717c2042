"""Command-line values: finite numbers, negative times reach their own check, one message."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.cli import build_parser, main
from planner.cli.options import join_negative_values


def _one_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpuplan: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("argv", [["plan", "tiny", "--at", "-1h"], ["plan", "tiny", "--at=-1h"],
                                  ["explain", "tiny", "j1", "--at", "-90"]])
def test_a_negative_time_gets_the_options_own_message(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """`--at -1h` is not "expected one argument": it reaches --at's check."""
    assert "--at: must not be negative" in _one_error(argv, capsys)


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "tiny", "--time-limit", "nan"],
        ["plan", "tiny", "--time-limit", "inf"],
        ["plan", "tiny", "--time-limit", "-1"],
        ["explain", "tiny", "j1", "--time-limit", "nan"],
        ["simulate", "tiny", "--days", "inf", "--policy", "fairshare"],
        ["simulate", "tiny", "--days", "nan", "--policy", "fairshare"],
        ["simulate", "tiny", "--time-limit", "inf", "--policy", "mip"],
        ["run", "tiny", "--time-limit", "inf"],
        ["run", "tiny", "--slice-seconds", "nan"],
    ],
)
def test_non_finite_numbers_are_refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """nan and inf pass a `<= 0` test; they are refused as not positive numbers."""
    assert "must be a positive number" in _one_error(argv, capsys)


def test_simulate_days_past_the_limit_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """`--days 1e9` would simulate for ever; it is past the time limit."""
    assert "--days: must be at most 3650" in _one_error(["simulate", "tiny", "--days", "1e9"], capsys)


def test_at_past_the_time_limit_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """`--at 100000000w` is refused by the duration limit."""
    assert "longer than the limit of 3650 days" in _one_error(["plan", "tiny", "--at", "100000000w"], capsys)


def test_only_options_that_take_values_are_joined() -> None:
    """A flag followed by a negative number is left alone; a value option is joined."""
    parser = build_parser()
    assert join_negative_values(parser, ["plan", "tiny", "--at", "-1h"]) == ["plan", "tiny", "--at=-1h"]
    assert join_negative_values(parser, ["run", "--list-executors", "-1"]) == ["run", "--list-executors", "-1"]
    assert join_negative_values(parser, ["plan", "tiny", "--at", "2h"]) == ["plan", "tiny", "--at", "2h"]


def test_a_symlink_loop_is_reported_as_a_loop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`validate` on a link loop says loop, not "no such file"."""
    (tmp_path / "a.yaml").symlink_to(tmp_path / "b.yaml")
    (tmp_path / "b.yaml").symlink_to(tmp_path / "a.yaml")
    err = _one_error(["validate", str(tmp_path / "a.yaml")], capsys)
    assert "a symbolic link loop" in err and "no such file" not in err


def test_validate_of_a_device_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    """`validate /dev/zero` is one line and exit 2, at once."""
    assert "not a regular file" in _one_error(["validate", "/dev/zero"], capsys)
