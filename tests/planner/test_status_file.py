"""The live status file: atomic replacement, exact round trip, errors that name the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from models import (
    Histogram,
    JobLine,
    LiveStatus,
    PendingReason,
    ProjectStatus,
    QueuedJob,
    SchedulerCounters,
)
from planner.status_file import (
    StatusBoard,
    StatusFileError,
    read_status,
    status_path,
    write_status,
)


def sample() -> LiveStatus:
    return LiveStatus(
        at=7200.0, wall=1_767_571_200.0, origin=1_767_564_000.0,
        projects=(ProjectStatus(project="research/nlp", share=0.6, owed_gpu_h=10, delivered_gpu_h=13,
                                charged_gpu_h=13, unallocated_gpu_h=1, ratio=1.3, headroom_gpu_h=4,
                                running_gpus=8, waiting_gpus=16),),
        queue=(QueuedJob(job="j2", project="research/nlp", user="ana", gpus=16, submitted=3600,
                         wait_s=3600, position=1, reason=PendingReason.FAIR_SHARE_RANK,
                         text="waiting: ..."),),
        scheduler=SchedulerCounters(plan_seconds=0.4, decisions_total={"start": 3},
                                    submit_to_start={"debug": Histogram().observe(4.0)}),
        jobs=(JobLine(job="j2", project="research/nlp", state="waiting", text="waiting: ..."),),
    )


def test_status_path_is_next_to_the_ledger(tmp_path: Path) -> None:
    """The status of the run on LEDGER is LEDGER.status.json."""
    assert status_path(tmp_path / "usage.sqlite") == tmp_path / "usage.sqlite.status.json"


def test_status_path_of_a_linked_ledger_is_beside_the_real_file(tmp_path: Path) -> None:
    """A run through a link and a reader of the real file share one status file."""
    (tmp_path / "alias.sqlite").symlink_to("u.sqlite")
    assert status_path(tmp_path / "alias.sqlite") == tmp_path / "u.sqlite.status.json"


def test_round_trip_is_exact(tmp_path: Path) -> None:
    """What is written is read back unchanged, histograms and enums included."""
    path = tmp_path / "s.json"
    write_status(path, sample())
    assert read_status(path) == sample()


def test_rewrite_replaces_the_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    """A second write replaces the first; no temporary file stays behind."""
    path = tmp_path / "s.json"
    write_status(path, sample())
    write_status(path, sample().model_copy(update={"at": 9000.0}))
    assert read_status(path).at == 9000.0
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]


def test_reader_holding_the_old_file_keeps_reading_it(tmp_path: Path) -> None:
    """os.replace swaps the file: a reader that opened the old one reads it whole."""
    path = tmp_path / "s.json"
    write_status(path, sample())
    with open(path, encoding="utf-8") as old:
        write_status(path, sample().model_copy(update={"at": 9000.0}))
        assert LiveStatus.model_validate_json(old.read()).at == 7200.0


def test_missing_file_is_named(tmp_path: Path) -> None:
    """A missing status file raises an error naming it."""
    with pytest.raises(StatusFileError, match=r"s\.json: no live status"):
        read_status(tmp_path / "s.json")


def test_bad_field_is_named(tmp_path: Path) -> None:
    """A status with a bad field names the file and the field path."""
    path = tmp_path / "s.json"
    path.write_text('{"at": 1, "wall": 2, "queue": [{"job": "j"}]}')
    with pytest.raises(StatusFileError, match=r"s\.json: not a gpuplan live status: queue\.0\.project"):
        read_status(path)


def test_not_json_is_an_error(tmp_path: Path) -> None:
    """A file that is not JSON is refused with its name."""
    path = tmp_path / "s.json"
    path.write_text("garbage")
    with pytest.raises(StatusFileError, match=r"s\.json"):
        read_status(path)


def test_board_keeps_the_latest_and_writes_it(tmp_path: Path) -> None:
    """A board returns nothing before the first publish, then the last status, also on disk."""
    path = tmp_path / "s.json"
    board = StatusBoard(path)
    assert board.latest() is None and not path.exists()
    board.publish(sample())
    board.publish(sample().model_copy(update={"at": 9000.0}))
    assert board.latest() is not None and board.latest().at == 9000.0  # type: ignore[union-attr]
    assert read_status(path).at == 9000.0


def test_board_without_a_file_keeps_memory_only(tmp_path: Path) -> None:
    """A board without a path (a run without a ledger) writes nothing."""
    board = StatusBoard()
    board.publish(sample())
    assert board.latest() == sample()
    assert list(tmp_path.iterdir()) == []
