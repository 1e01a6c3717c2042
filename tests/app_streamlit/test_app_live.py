"""The live page (app_streamlit/live.py), headless with AppTest, on ledgers written here."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from app_streamlit import live
from models import LiveStatus, PendingReason, QueuedJob
from planner.cli import main
from planner.ledger import Ledger, Usage
from planner.status_file import status_path, write_status

LIVE = str(Path(live.__file__).resolve())
HOUR = 3600.0
REASON = "waiting: project research/nlp is at 130 % of its share this week; 3 jobs of projects further below go first"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture()
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "usage.sqlite"
    with Ledger(path) as led:
        for h in range(6):
            led.record([
                Usage("research/nlp", h * HOUR, (h + 1) * HOUR, allocated_gpu_h=8.0, owed_gpu_h=6.0),
                Usage("research/cv", h * HOUR, (h + 1) * HOUR, allocated_gpu_h=2.0, owed_gpu_h=4.0),
                Usage("ops/infra", h * HOUR, (h + 1) * HOUR, unallocated_gpu_h=1.0, owed_gpu_h=1.0),
            ])
    write_status(status_path(path), LiveStatus(
        at=6 * HOUR, wall=1_767_571_200.0,
        queue=(QueuedJob(job="j2", project="research/nlp", user="ana", gpus=16, submitted=5 * HOUR,
                         wait_s=HOUR, position=1, reason=PendingReason.FAIR_SHARE_RANK, text=REASON),),
    ))
    return path


def run_page(path: Path) -> AppTest:
    at = AppTest.from_file(LIVE, default_timeout=60)
    at.session_state["live_ledger"] = str(path)
    at.run()
    assert not at.exception, at.exception
    return at


def test_standing_over_time_per_project_and_program(ledger: Path) -> None:
    """Standings are charged over owed per window, and programs add up their projects."""
    with Ledger.open_read_only(ledger) as led:
        frame = live.standing_over_time(led, lookback=7 * 86400.0, points=7)
    last = frame[frame["hour"] == frame["hour"].max()].set_index(["level", "name"])["ratio"]
    assert last[("project", "research/nlp")] == pytest.approx(8 / 6)
    assert last[("project", "research/cv")] == pytest.approx(0.5)
    assert last[("program", "research")] == pytest.approx(60 / 60)
    assert last[("program", "ops")] == 0.0  # free work is not charged
    assert sorted(frame["hour"].unique()) == pytest.approx([1, 2, 3, 4, 5, 6])


def test_page_shows_owed_delivered_and_the_queue_with_reasons(ledger: Path) -> None:
    """The page draws the standing and owed charts and lists the queue with its reasons."""
    at = run_page(ledger)
    keys = {c.key for c in at.get("plotly_chart") if c.key}
    assert keys == {"live_standing_program", "live_standing_project", "live_owed"}
    tables = [d.value for d in at.dataframe]
    owed = next(t for t in tables if "Owed (GPU-h)" in t.columns).set_index("Project")
    assert owed.loc["research/nlp", "Owed (GPU-h)"] == pytest.approx(36.0)
    assert owed.loc["research/nlp", "Delivered (GPU-h)"] == pytest.approx(48.0)
    queue = next(t for t in tables if "Reason" in t.columns)
    assert list(queue["Job"]) == ["j2"] and list(queue["Reason"]) == [REASON]


def test_page_never_writes(ledger: Path) -> None:
    """Showing the page leaves the ledger's records and the status file as they were."""
    before = (len(Ledger.open_read_only(ledger)), digest(status_path(ledger)))
    run_page(ledger)
    assert (len(Ledger.open_read_only(ledger)), digest(status_path(ledger))) == before


def test_missing_ledger_is_an_error_not_a_new_file(tmp_path: Path) -> None:
    """A ledger that does not exist is named in an error, and no file is created."""
    at = run_page(tmp_path / "none.sqlite")
    assert any("no such ledger file" in e.value for e in at.error)
    assert list(tmp_path.iterdir()) == []


def test_page_on_a_ledger_written_by_a_short_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A ledger from a short dryrun `gpuplan run` shows its standings; the queue waits for a status."""
    path = tmp_path / "run.sqlite"
    code = main(["run", "tiny", "--executor", "dryrun", "-o", f"log={tmp_path / 'log.jsonl'}",
                 "--epochs", "1", "--slice-seconds", "0.2", "--ledger", str(path), "--time-limit", "5"])
    assert code == 0, capsys.readouterr().err
    at = run_page(path)
    owed = next(d.value for d in at.dataframe if "Owed (GPU-h)" in d.value.columns)
    with Ledger.open_read_only(path) as led:
        span = led.span()
        assert span is not None
        expected = led.window_totals(span[1] - 7 * 86400.0, span[1])
    assert isinstance(owed, pd.DataFrame)
    assert set(owed["Project"]) == set(expected)
    if not status_path(path).exists():  # until gpuplan run writes the status file
        assert any("no live status" in w.value for w in at.warning)


def test_plan_view_and_squeue_use_the_same_reason_words() -> None:
    """The app's plan view says the same for each pending reason as squeue and gpuplan status."""
    from app_streamlit.planview import REASON_WORDS
    from planner.reasons import REASON_SENTENCES

    assert REASON_WORDS == REASON_SENTENCES
