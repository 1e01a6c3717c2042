"""The SQLite usage ledger: records, window sums, append-only, schema, copies, durability."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from planner.ledger import (
    SCHEMA_VERSION,
    Ledger,
    LedgerError,
    Totals,
    Usage,
    check_writable,
    inspect_ledger_file,
    lock_for_run,
)

HOUR = 3600.0
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["memory", "file"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ledger]:
    """The in-memory and the file ledger: every behaviour below is checked on both."""
    path = ":memory:" if request.param == "memory" else tmp_path / "ledger.db"
    with Ledger(path) as led:
        yield led


def test_records_read_back_in_order(ledger: Ledger) -> None:
    """Recorded rows come back in insertion order; charged defaults to allocated."""
    rows = [
        Usage("a", 0.0, HOUR, allocated_gpu_h=8.0, owed_gpu_h=10.0),
        Usage("b", 0.0, HOUR, allocated_gpu_h=4.0, charged_gpu_h=8.0, unallocated_gpu_h=2.0),
    ]
    assert ledger.record(rows) == 2
    back = ledger.records()
    assert back[0] == Usage("a", 0.0, HOUR, 8.0, 8.0, 0.0, 10.0)
    assert back[1] == Usage("b", 0.0, HOUR, 4.0, 8.0, 2.0, 0.0)
    assert ledger.records(project="b") == [back[1]]
    assert len(ledger) == 2 and ledger.span() == (0.0, HOUR)


def test_window_totals_sum_per_project_pro_rata(ledger: Ledger) -> None:
    """Window sums add whole records and the overlapping part of straddling ones."""
    ledger.record([Usage("a", h * HOUR, (h + 1) * HOUR, 1.0, 2.0, 3.0, 4.0) for h in range(10)])
    ledger.record([Usage("b", 0.0, 10 * HOUR, owed_gpu_h=10.0)])
    totals = ledger.window_totals(2.5 * HOUR, 5 * HOUR)  # 2.5 hours of each
    assert totals["a"] == pytest.approx(Totals(2.5, 5.0, 7.5, 10.0))
    assert totals["b"] == pytest.approx(Totals(0.0, 0.0, 0.0, 2.5))
    assert ledger.window_totals(20 * HOUR, 30 * HOUR) == {}
    assert ledger.window_totals(5 * HOUR, 5 * HOUR) == {}


def test_window_totals_see_later_records(ledger: Ledger) -> None:
    """Records written after a query are included in the next query."""
    ledger.record([Usage("a", 0.0, HOUR, 1.0)])
    assert ledger.window_totals(0.0, 10 * HOUR)["a"].allocated_gpu_h == 1.0
    ledger.record([Usage("a", HOUR, 2 * HOUR, 2.0)])
    assert ledger.window_totals(0.0, 10 * HOUR)["a"].allocated_gpu_h == 3.0


def test_a_window_holding_every_record_sums_each_project_in_record_order(ledger: Ledger) -> None:
    """A window over every record (a run shorter than the lookback) gives, per project,
    the exact floats of adding its records in the order they were written, as a window
    that cuts records adds their whole ones; a window that cuts one still prorates."""
    rng = np.random.default_rng(7)
    rows = []
    for h in range(30):
        for p in ("a", "b", "c")[: 1 + h % 3]:
            a, b, c, d = (float(x) for x in rng.uniform(0.0, 97.3, size=4))
            rows.append(Usage(p, h * HOUR, (h + 1) * HOUR, a, b, c, d))
    ledger.record(rows[:40])
    ledger.record(rows[40:])
    expected: dict[str, list[float]] = {}
    for u in rows:
        total = expected.setdefault(u.project, [0.0, 0.0, 0.0, 0.0])
        for k, value in enumerate(
            (u.allocated_gpu_h, u.charged_gpu_h, u.unallocated_gpu_h, u.owed_gpu_h)
        ):
            total[k] += value
    whole = ledger.window_totals(-HOUR, 40 * HOUR)
    assert whole == {p: Totals(*t) for p, t in expected.items()}
    assert list(whole) == ["a", "b", "c"]
    cut = ledger.window_totals(0.5 * HOUR, 30 * HOUR)  # half of hour 0 (project a only)
    assert cut["a"].owed_gpu_h == pytest.approx(expected["a"][3] - rows[0].owed_gpu_h / 2)
    assert cut["b"] == pytest.approx(whole["b"])


def test_a_project_first_seen_in_a_later_batch_is_in_the_whole_window(ledger: Ledger) -> None:
    """A project whose first record comes in a later batch appears in a window over
    every record with its own sums, and the earlier projects keep theirs."""
    ledger.record([Usage("a", 0.0, HOUR, 1.5, 2.5, 0.5, 3.0)])
    assert ledger.window_totals(-HOUR, 2 * HOUR) == {"a": Totals(1.5, 2.5, 0.5, 3.0)}
    ledger.record([Usage("d", HOUR, 2 * HOUR, 4.0, 4.0, 0.0, 2.0), Usage("a", HOUR, 2 * HOUR, 1.0)])
    assert ledger.window_totals(-HOUR, 2 * HOUR) == {
        "a": Totals(2.5, 3.5, 0.5, 3.0),
        "d": Totals(4.0, 4.0, 0.0, 2.0),
    }


@pytest.mark.parametrize(
    ("usage", "message"),
    [
        (Usage("a", HOUR, HOUR), "end"),
        (Usage("a", 0.0, HOUR, allocated_gpu_h=-1.0), "allocated_gpu_h must not be negative"),
        (Usage("a", 0.0, HOUR, owed_gpu_h=float("nan")), "owed_gpu_h must be a finite number"),
        (Usage("a", 0.0, float("inf"), 1.0), "end must be a finite number"),
        (Usage("a", 0.0, HOUR, 1.0, charged_gpu_h=-0.5), "charged_gpu_h must not be negative"),
        (Usage("", 0.0, HOUR), "project"),
    ],
)
def test_bad_record_rejects_whole_batch(ledger: Ledger, usage: Usage, message: str) -> None:
    """A bad record raises ValueError naming the field, and nothing of its batch is written."""
    with pytest.raises(ValueError, match=message):
        ledger.record([Usage("ok", 0.0, HOUR, 1.0), usage])
    assert len(ledger) == 0


def test_numpy_numbers_are_accepted(ledger: Ledger) -> None:
    """Amounts computed with numpy (float64, int64) record like Python numbers."""
    import numpy as np

    ledger.record([Usage("a", np.float64(0.0), np.int64(3600), allocated_gpu_h=np.float64(2.5))])  # type: ignore[arg-type]
    assert ledger.records() == [Usage("a", 0.0, HOUR, 2.5, 2.5, 0.0, 0.0)]


def test_unopenable_path_is_an_error_naming_it(tmp_path: Path) -> None:
    """A ledger path in a missing folder is a LedgerError naming the path."""
    with pytest.raises(LedgerError, match="missing/ledger.db"):
        Ledger(tmp_path / "missing" / "ledger.db")


def test_ledger_is_append_only(ledger: Ledger) -> None:
    """UPDATE and DELETE of records are refused by the database itself."""
    ledger.record([Usage("a", 0.0, HOUR, 1.0)])
    conn = ledger._conn  # going around the API on purpose: the schema must refuse
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("UPDATE usage SET allocated_gpu_h = 99")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("DELETE FROM usage")
    assert ledger.records()[0].allocated_gpu_h == 1.0


def test_what_if_copy_never_writes_to_the_original(ledger: Ledger) -> None:
    """A what-if copy holds the same records; writing to it leaves the original unchanged."""
    ledger.record([Usage("a", 0.0, HOUR, 1.0)])
    with ledger.what_if() as copy:
        assert copy.records() == ledger.records()
        copy.record([Usage("a", HOUR, 2 * HOUR, 5.0)])
        assert copy.window_totals(0.0, 2 * HOUR)["a"].allocated_gpu_h == 6.0
        assert copy.path == ":memory:"
    assert len(ledger) == 1
    assert ledger.window_totals(0.0, 2 * HOUR)["a"].allocated_gpu_h == 1.0


def test_file_ledger_is_wal_with_schema_version(tmp_path: Path) -> None:
    """A file ledger uses WAL mode and records its schema version."""
    path = tmp_path / "l.db"
    Ledger(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
    conn.close()


def test_file_ledger_persists_and_sees_other_writers(tmp_path: Path) -> None:
    """Records survive reopening; a second writer's records reach the first reader."""
    path = tmp_path / "l.db"
    with Ledger(path) as first:
        first.record([Usage("a", 0.0, HOUR, 1.0)])
        assert first.window_totals(0.0, HOUR)["a"].allocated_gpu_h == 1.0
        with Ledger(path) as second:
            second.record([Usage("a", HOUR, 2 * HOUR, 2.0)])
        assert first.window_totals(0.0, 2 * HOUR)["a"].allocated_gpu_h == 3.0
    with Ledger(path) as again:
        assert len(again) == 2


def test_other_schema_version_is_an_error_naming_the_file(tmp_path: Path) -> None:
    """Opening a ledger of another schema version fails with the file and both versions."""
    path = tmp_path / "old.db"
    Ledger(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE schema_version SET version = 99")
    conn.commit()
    conn.close()
    with pytest.raises(LedgerError, match=rf"old\.db: ledger schema version 99.*version {SCHEMA_VERSION}"):
        Ledger(path)


def test_not_a_ledger_is_an_error_naming_the_file(tmp_path: Path) -> None:
    """A file that is not SQLite, or SQLite without the ledger's tables, is a LedgerError."""
    junk = tmp_path / "junk.db"
    junk.write_text("this is not a database, just text " * 100)
    with pytest.raises(LedgerError, match="junk.db"):
        Ledger(junk)
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (x)")
    conn.close()
    with pytest.raises(LedgerError, match="other.db: not a gpuplan ledger"):
        Ledger(other)


WRITER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {repo!r})
    from planner.ledger import Ledger, Usage
    ledger = Ledger(sys.argv[1])
    i = int(sys.argv[2])
    while True:
        # A batch of 5 rows marked with i: after a kill it must be all there or absent.
        ledger.record([Usage(f"p{{k}}", i, i + 1.0, allocated_gpu_h=float(i)) for k in range(5)])
        print(i, flush=True)
        i += 1
    """
)


def test_sigkill_loses_no_acknowledged_record(tmp_path: Path) -> None:
    """Killing a writer with SIGKILL 20 times loses no acknowledged record and no half batch."""
    script = tmp_path / "writer.py"
    script.write_text(WRITER.format(repo=str(REPO)))
    path = tmp_path / "ledger.db"
    acknowledged: set[int] = set()
    for round_ in range(20):
        proc = subprocess.Popen(
            [sys.executable, str(script), str(path), str(round_ * 1_000_000)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        # Vary how long each writer lives so kills land at different points of a write.
        for _ in range(1 + (round_ * 7) % 13):
            line = proc.stdout.readline()
            assert line, "writer died before acknowledging"
            acknowledged.add(int(line))
        os.kill(proc.pid, signal.SIGKILL)
        # Commits acknowledged before the kill but not yet read are in the pipe.
        acknowledged.update(int(line) for line in proc.stdout.read().split())
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
    with Ledger(path) as ledger:
        counts: dict[float, int] = {}
        for row in ledger.records():
            counts[row.start] = counts.get(row.start, 0) + 1
    assert acknowledged <= {int(s) for s in counts}
    assert set(counts.values()) == {5}  # every batch whole
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


# -- never touching what is not ours; one run at a time (issue 15) --------------------


def _foreign_files(tmp_path: Path) -> dict[str, Path]:
    """Files a careless --ledger may name: text, empty, another application's SQLite."""
    text = tmp_path / "notes.txt"
    text.write_bytes(b"x")
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    rollback = tmp_path / "app.db"
    conn = sqlite3.connect(rollback)
    conn.execute("CREATE TABLE settings (k TEXT, v TEXT)")
    conn.execute("INSERT INTO settings VALUES ('theme', 'dark')")
    conn.commit()
    conn.close()
    wal = tmp_path / "app-wal.db"
    conn = sqlite3.connect(wal)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE events (x)")
    conn.commit()
    conn.close()
    prefix = tmp_path / "prefix.db"  # SQLite's magic, then junk
    prefix.write_bytes(b"SQLite format 3\x00" + b"\x01" * 200)
    return {"text": text, "empty": empty, "rollback": rollback, "wal": wal, "prefix": prefix}


@pytest.mark.parametrize("kind", ["text", "empty", "rollback", "wal", "prefix"])
def test_a_foreign_file_is_refused_and_left_byte_for_byte_unchanged(tmp_path: Path, kind: str) -> None:
    """Not ours: LedgerError, the same bytes, and no -wal/-shm files left beside it."""
    path = _foreign_files(tmp_path)[kind]
    before = path.read_bytes()
    listing = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(LedgerError, match=f"{path.name}: not a "):
        Ledger(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == listing


def test_an_other_schema_version_is_left_unchanged(tmp_path: Path) -> None:
    """A gpuplan ledger of another version is refused without switching its journal."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_version (version INTEGER)")
    conn.execute("CREATE TABLE usage (x)")
    conn.execute("INSERT INTO schema_version VALUES (99)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(LedgerError, match="schema version 99"):
        Ledger(path)
    assert path.read_bytes() == before


def test_a_directory_is_not_a_ledger(tmp_path: Path) -> None:
    """A folder given as the ledger is named as one."""
    with pytest.raises(LedgerError, match="is a directory"):
        Ledger(tmp_path)


def test_a_read_only_ledger_is_refused_before_a_run(tmp_path: Path) -> None:
    """check_writable names a ledger the run could not record into."""
    path = tmp_path / "ledger.db"
    Ledger(path).close()
    path.chmod(0o444)
    try:
        if os.access(path, os.W_OK):
            pytest.skip("running as a user who may write read-only files (root)")
        with pytest.raises(LedgerError, match="ledger.db: the ledger is read-only"):
            check_writable(path)
    finally:
        path.chmod(0o644)


def test_a_ledger_the_os_will_not_let_us_write_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same check where the OS refuses writing (as root, chmod alone does not)."""
    path = tmp_path / "ledger.db"
    Ledger(path).close()
    real_access = os.access

    def access(target: object, mode: int) -> bool:
        return False if str(target) == str(path) and mode & os.W_OK else real_access(str(target), mode)

    monkeypatch.setattr("planner.ledger.os.access", access)
    with pytest.raises(LedgerError, match="ledger.db: the ledger is read-only"):
        check_writable(path)


def test_a_new_or_own_ledger_is_recognised(tmp_path: Path) -> None:
    """inspect_ledger_file says new for a missing file and ours for a gpuplan ledger."""
    path = tmp_path / "ledger.db"
    assert inspect_ledger_file(path) == "new"
    assert not path.exists()  # inspecting creates nothing
    Ledger(path).close()
    assert inspect_ledger_file(path) == "ours"


def test_a_second_run_lock_is_refused(tmp_path: Path) -> None:
    """While one run holds the lock, a second lock fails, naming the holder's pid."""
    path = tmp_path / "ledger.db"
    held = lock_for_run(path)
    with pytest.raises(LedgerError, match=rf"another gpuplan run is using this ledger \(pid {os.getpid()}\)"):
        lock_for_run(path)
    held.release()
    lock_for_run(path).release()  # released: free again


HOLDER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {repo!r})
    from planner.ledger import lock_for_run
    lock = lock_for_run(sys.argv[1])
    print("locked", flush=True)
    time.sleep(60)
    """
)


def test_a_run_lock_held_by_another_process_is_refused(tmp_path: Path) -> None:
    """The lock is between processes; it goes with the process that held it."""
    script = tmp_path / "holder.py"
    script.write_text(HOLDER.format(repo=str(REPO)))
    path = tmp_path / "ledger.db"
    proc = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        with pytest.raises(LedgerError, match=f"pid {proc.pid}"):
            lock_for_run(path)
    finally:
        proc.kill()
        proc.wait()
    lock_for_run(path).release()


def test_open_read_only_reads_a_live_ledger_and_never_writes(tmp_path: Path) -> None:
    """A read-only ledger sees rows a writer appends later, and cannot append itself."""
    path = tmp_path / "usage.sqlite"
    writer = Ledger(path)
    writer.record([Usage("a", 0.0, 3600.0, allocated_gpu_h=1.0, owed_gpu_h=2.0)])
    reader = Ledger.open_read_only(path)
    writer.record([Usage("a", 3600.0, 7200.0, allocated_gpu_h=1.0, owed_gpu_h=2.0)])
    assert reader.window_totals(0.0, 7200.0)["a"].owed_gpu_h == 4.0
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        reader.record([Usage("a", 7200.0, 10800.0)])
    reader.close()
    writer.close()


def test_open_read_only_does_not_create_a_missing_ledger(tmp_path: Path) -> None:
    """Opening a missing ledger read-only is an error naming it, and creates nothing."""
    with pytest.raises(LedgerError, match="no such ledger file"):
        Ledger.open_read_only(tmp_path / "missing.sqlite")
    assert list(tmp_path.iterdir()) == []


def test_open_read_only_names_a_directory_as_one(tmp_path: Path) -> None:
    with pytest.raises(LedgerError, match="is a directory, not a ledger file"):
        Ledger.open_read_only(tmp_path)


def test_open_read_only_refuses_a_file_that_is_not_a_ledger(tmp_path: Path) -> None:
    """A file that is not a gpuplan ledger is refused with its name."""
    path = tmp_path / "x.sqlite"
    path.write_text("hello")
    with pytest.raises(LedgerError, match="x.sqlite"):
        Ledger.open_read_only(path)



def test_a_run_lock_through_a_symbolic_link_is_the_same_lock(tmp_path: Path) -> None:
    """A link to a ledger names the same ledger: its run is refused while the real
    file's run holds the lock."""
    real, alias = tmp_path / "u.sqlite", tmp_path / "alias.sqlite"
    alias.symlink_to(real.name)
    held = lock_for_run(real)
    with pytest.raises(LedgerError, match="another gpuplan run is using this ledger"):
        lock_for_run(alias)
    held.release()
    assert not (tmp_path / "alias.sqlite.lock").exists()


def test_a_live_ledger_is_recognised_through_a_symbolic_link(tmp_path: Path) -> None:
    """While a writer's schema and rows are still in the journal (beside the real file),
    a link to the ledger is read as the gpuplan ledger it is."""
    real, alias = tmp_path / "u.sqlite", tmp_path / "alias.sqlite"
    alias.symlink_to(real.name)
    with Ledger(real) as writer:
        writer.record([Usage("a", 0.0, 3600.0, allocated_gpu_h=1.0, owed_gpu_h=2.0)])
        assert inspect_ledger_file(alias) == "ours"
        reader = Ledger.open_read_only(alias)
        assert reader.window_totals(0.0, 3600.0)["a"].owed_gpu_h == 2.0
        reader.close()
