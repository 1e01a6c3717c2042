"""The run-state file (LEDGER.run.json): what is not one is refused, naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from models.errors import GpuplanError
from planner.runstate import RunState, RunStateError


def test_a_missing_file_starts_a_new_state_and_saves_it(tmp_path: Path) -> None:
    """No file: the state starts now and is written at once."""
    path = tmp_path / "l.db.run.json"
    state = RunState.load(path, 1000.0)
    assert state.origin == 1000.0 and json.loads(path.read_text()) == {
        "origin": 1000.0, "submitted": [], "free": []}


def test_read_writes_nothing(tmp_path: Path) -> None:
    """RunState.read of a missing file is None and creates no file (a pre-run check)."""
    path = tmp_path / "l.db.run.json"
    assert RunState.read(path) is None and not path.exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"origin": NaN}', "origin: expected the run's start as a finite number of seconds, got nan"),
        ('{"origin": Infinity}', "origin: expected the run's start as a finite number"),
        ('{"origin": true}', "origin: expected the run's start"),
        ('{"origin": "yesterday"}', "origin: expected the run's start"),
        ('{"origin": 5, "submitted": [1, 2]}', "submitted: expected a list of job ids"),
        ('{"origin": 5, "free": "j1"}', "free: expected a list of job ids"),
        ("[1, 2]", "not a gpuplan run state file (expected a JSON object with origin and submitted)"),
        ("{", "not a gpuplan run state file"),
    ],
)
def test_a_bad_state_file_is_refused_naming_it(tmp_path: Path, content: str, message: str) -> None:
    """Non-finite origins and wrong shapes are RunStateError (a GpuplanError) naming the file."""
    path = tmp_path / "l.db.run.json"
    path.write_text(content)
    with pytest.raises(RunStateError) as info:
        RunState.load(path, 0.0)
    assert str(info.value).startswith(f"{path}: ") and message in str(info.value)
    assert isinstance(info.value, GpuplanError) and isinstance(info.value, ValueError)
    assert path.read_text() == content  # left as it was


def test_a_directory_is_refused(tmp_path: Path) -> None:
    """A folder where the state file should be is named as one."""
    path = tmp_path / "l.db.run.json"
    path.mkdir()
    with pytest.raises(RunStateError, match="is a directory, not a gpuplan run state file"):
        RunState.load(path, 0.0)


@pytest.mark.parametrize(
    ("origin", "message"),
    [(99999999999999.0, "s after now; delete the file"), (-5.0, "more than 3650 days ago; delete the file")],
)
def test_an_origin_after_now_or_too_long_ago_is_refused(tmp_path: Path, origin: float, message: str) -> None:
    """Scenario time counts from the origin: one in the future, or older than the longest
    run accepted, is refused, naming the file and the field."""
    path = tmp_path / "l.db.run.json"
    path.write_text(json.dumps({"origin": origin, "submitted": []}))
    with pytest.raises(RunStateError) as info:
        RunState.load(path, 1_800_000_000.0)
    assert str(info.value).startswith(f"{path}: origin: ") and message in str(info.value)


def test_an_origin_a_little_ahead_is_kept(tmp_path: Path) -> None:
    """Two hosts' clocks may differ by a little: an origin a minute ahead is the run's."""
    path = tmp_path / "l.db.run.json"
    path.write_text(json.dumps({"origin": 1060.0, "submitted": ["j1"]}))
    assert RunState.load(path, 1000.0).origin == 1060.0


def test_free_work_is_kept_and_a_file_without_it_reads_as_none(tmp_path: Path) -> None:
    """The funded jobs running uncharged survive a save and a load; a file written before
    the field existed reads as no free work."""
    path = tmp_path / "l.db.run.json"
    state = RunState.load(path, 1000.0)
    state.free = {"j2", "j1"}
    state.save()
    assert RunState.load(path, 1000.0).free == {"j1", "j2"}
    path.write_text(json.dumps({"origin": 1000.0, "submitted": ["j1"]}))
    assert RunState.load(path, 1000.0).free == set()
