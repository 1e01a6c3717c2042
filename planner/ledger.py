"""The usage ledger: GPU time delivered per project per interval, in SQLite.

Each record says, for one project and one interval ``[start, end)`` (seconds from the
scenario's start), how many H100-equivalent GPU-hours it received as allocated (funded)
work, what that cost its budget (``charged``: urgent work at ``policy.urgent_charge``
times), how many it received as unallocated (free) work, and how many it was owed (its
water-filled share times the interval). Fair-share standings are sums of these columns
over a window, so the ledger alone is enough to rank projects.

Design choices:

- One code path for files and memory. A file ledger runs in WAL mode with
  ``synchronous=FULL``: a commit is on disk before :meth:`Ledger.record` returns, so a
  crash (even ``SIGKILL`` mid-write) loses no acknowledged record. The simulator's
  ``":memory:"`` ledger skips only the journal settings.
- Append-only: triggers refuse ``UPDATE`` and ``DELETE`` on the records, so history
  (and the standings computed from it) can be replayed.
- A ``schema_version`` table; opening a ledger of another version is an error, never a
  silent migration.
- :meth:`Ledger.what_if` returns an in-memory copy: edits there never reach the file.
- A file is touched only once it is recognised as a gpuplan ledger (or does not exist
  yet): :func:`inspect_ledger_file` reads its header and schema read-only first, so a
  text file or another application's database is refused unchanged, byte for byte.
- One live run per ledger: :func:`lock_for_run` takes an exclusive ``flock`` on
  ``LEDGER.lock``; a second run is refused with a message naming the holder.
- Files beside a ledger (``-wal``, ``.lock``, ``.run.json``, ``.status.json``) are named
  after the real file (:func:`real_ledger_path`): a symbolic link to a ledger is the
  same ledger, with the same lock.
"""

from __future__ import annotations

import errno
import fcntl
import math
import numbers
import os
import sqlite3
import stat
import threading
import urllib.parse
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, NamedTuple

import numpy as np

from models.errors import GpuplanError

SCHEMA_VERSION = 1

_SCHEMA = (
    "CREATE TABLE schema_version (version INTEGER NOT NULL)",
    """CREATE TABLE usage (
        id INTEGER PRIMARY KEY,
        project TEXT NOT NULL,
        t_start REAL NOT NULL,
        t_end REAL NOT NULL CHECK (t_end > t_start),
        allocated_gpu_h REAL NOT NULL CHECK (allocated_gpu_h >= 0),
        charged_gpu_h REAL NOT NULL CHECK (charged_gpu_h >= 0),
        unallocated_gpu_h REAL NOT NULL CHECK (unallocated_gpu_h >= 0),
        owed_gpu_h REAL NOT NULL CHECK (owed_gpu_h >= 0)
    )""",
    # Standings read the recent window only: an index on the interval end keeps that a
    # range scan however long the history grows.
    "CREATE INDEX usage_by_end ON usage (t_end)",
    "CREATE TRIGGER usage_no_update BEFORE UPDATE ON usage "
    "BEGIN SELECT RAISE(ABORT, 'the usage ledger is append-only'); END",
    "CREATE TRIGGER usage_no_delete BEFORE DELETE ON usage "
    "BEGIN SELECT RAISE(ABORT, 'the usage ledger is append-only'); END",
)

_COLUMNS = "project, t_start, t_end, allocated_gpu_h, charged_gpu_h, unallocated_gpu_h, owed_gpu_h"


class LedgerError(GpuplanError):
    """A ledger file that cannot be used (not ours, other schema, read-only, in use by
    another run); the message names the file."""


SQLITE_MAGIC = b"SQLite format 3\x00"


def real_ledger_path(path: str | Path) -> str:
    """The file ``path`` names, symbolic links resolved; ``path`` as given when none is
    involved (so messages keep the user's spelling).

    Every file kept beside a ledger is named from this: through a link named otherwise,
    two runs would take two locks on one ledger, and a reader would miss its journal.
    """
    given = os.fspath(path)
    real = os.path.realpath(given)
    return given if real == os.path.abspath(given) else real


def beside_ledger(ledger: str | Path, suffix: str) -> Path:
    """The file kept beside ``ledger`` with ``suffix`` (``-wal``, ``.lock``,
    ``.run.json``, ``.status.json``), named after the real file
    (:func:`real_ledger_path`)."""
    return Path(f"{real_ledger_path(ledger)}{suffix}")


def inspect_ledger_file(path: str | Path) -> Literal["new", "ours"]:
    """Whether ``path`` is a ledger to create (``"new"``) or a gpuplan ledger (``"ours"``).

    Writes nothing, ever: a file is read through a read-only SQLite connection, and only
    once its header says it is SQLite. Use it before anything else touches the path.

    Raises
    ------
    LedgerError
        For anything else (a directory, a device, an empty or text file, another
        application's database, another schema version), naming the file.
    """
    file = Path(path)
    try:
        info = os.stat(file)
    except FileNotFoundError:
        if not file.parent.is_dir():
            raise LedgerError(f"{file}: cannot create the ledger: no folder {str(file.parent)!r}") from None
        return "new"
    except OSError as exc:
        reason = "a symbolic link loop" if exc.errno == errno.ELOOP else exc.strerror
        raise LedgerError(f"{file}: cannot open the ledger: {reason}") from None
    if stat.S_ISDIR(info.st_mode):
        raise LedgerError(f"{file}: is a directory, not a ledger file")
    if not stat.S_ISREG(info.st_mode):
        raise LedgerError(f"{file}: not a regular file, so not a gpuplan ledger")
    try:
        with open(file, "rb") as handle:
            head = handle.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise LedgerError(f"{file}: cannot read the ledger: {exc.strerror}") from None
    # SQLite keeps the journal beside the real file, not beside a link to it.
    wal = beside_ledger(file, "-wal")
    # A 0-byte main file with a -wal beside it is a ledger another process is creating.
    creating = not head and os.path.exists(wal)
    if head != SQLITE_MAGIC and not creating:
        what = "an empty file" if not head else "not an SQLite file"
        raise LedgerError(
            f"{file}: not a gpuplan ledger ({what}); left unchanged. Name a new file "
            "for a new ledger"
        )
    uri = "file:" + urllib.parse.quote(str(file.resolve())) + "?mode=ro"
    if not os.path.exists(wal):
        # Nothing in flight: read the file as immutable, so SQLite creates no -wal/-shm
        # beside a database in WAL mode that may be another application's.
        uri += "&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True)
        try:
            _check_schema(conn, str(file))
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise LedgerError(f"{file}: not a usable gpuplan ledger: {exc}; left unchanged") from None
    return "ours"


def _check_schema(conn: sqlite3.Connection, name: str) -> None:
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "schema_version" not in tables or "usage" not in tables:
        raise LedgerError(
            f"{name}: not a gpuplan ledger (no schema_version/usage tables); left unchanged"
        )
    row = conn.execute("SELECT version FROM schema_version").fetchone()
    if row is None or row[0] != SCHEMA_VERSION:
        found = None if row is None else row[0]
        raise LedgerError(
            f"{name}: ledger schema version {found}, this gpuplan reads version {SCHEMA_VERSION}"
        )


def check_writable(path: str | Path) -> None:
    """Refuse a ledger this process could read but not write (checked before a run acts)."""
    file = Path(path)
    if file.exists() and not os.access(file, os.W_OK):
        raise LedgerError(f"{file}: the ledger is read-only; a run must write to it")
    folder = file.parent
    if not os.access(folder, os.W_OK | os.X_OK):
        raise LedgerError(
            f"{file}: the folder {str(folder)!r} is read-only; the ledger writes its journal there"
        )


class RunLock:
    """An exclusive lock on a ledger for one live run; released by :meth:`release`
    (or when the process ends, however it ends)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    def release(self) -> None:
        """Give the lock up (idempotent). The lock file stays: removing it would race."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_for_run(ledger_path: str | Path) -> RunLock:
    """Take the run lock of ``ledger_path`` (``LEDGER.lock``, holding the owner's pid).

    Raises
    ------
    LedgerError
        When another process holds it (naming that process), or the lock file cannot
        be made.
    """
    lock_path = beside_ledger(ledger_path, ".lock")
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise LedgerError(f"{ledger_path}: cannot create the run lock {lock_path}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise LedgerError(
                f"{ledger_path}: another gpuplan run is using this ledger (pid {holder}); "
                "stop it first, or give another --ledger"
            ) from None
        raise LedgerError(f"{ledger_path}: cannot lock {lock_path}: {exc.strerror}") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return RunLock(lock_path, fd)


def run_lock_held(ledger_path: str | Path) -> bool | None:
    """Whether a live run holds the run lock of ``ledger_path`` now (``None``: cannot
    tell, the lock file cannot be opened). No lock file: no run ever started, ``False``.

    Readers (``gpuplan status``) use it to tell a live status from the last one a run
    that has ended left behind. The probe is a shared, non-blocking lock given up at
    once: it never waits, and it fails at once while a run holds the lock.
    """
    lock_path = beside_ledger(ledger_path, ".lock")
    try:
        fd = os.open(lock_path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        return True if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES) else None
    finally:
        os.close(fd)  # also gives the probe's lock up
    return False


class Usage(NamedTuple):
    """One project's usage over ``[start, end)`` (H100-equivalent GPU-hours).

    ``charged_gpu_h`` defaults to ``allocated_gpu_h`` (no urgent work in the interval).
    """

    project: str
    start: float
    end: float
    allocated_gpu_h: float = 0.0
    charged_gpu_h: float | None = None
    unallocated_gpu_h: float = 0.0
    owed_gpu_h: float = 0.0


class Totals(NamedTuple):
    """Sums of a project's usage columns over a window (H100-equivalent GPU-hours)."""

    allocated_gpu_h: float = 0.0
    charged_gpu_h: float = 0.0
    unallocated_gpu_h: float = 0.0
    owed_gpu_h: float = 0.0


class Ledger:
    """Append-only SQLite usage ledger.

    Parameters
    ----------
    path
        A file (created when missing, WAL mode) or ``":memory:"`` (the default), which
        the simulator uses.

    Examples
    --------
    >>> with Ledger() as ledger:
    ...     ledger.record([Usage("research/nlp", 0.0, 3600.0, allocated_gpu_h=8.0, owed_gpu_h=10.0)])
    ...     ledger.window_totals(0.0, 3600.0)["research/nlp"].owed_gpu_h
    1
    10.0
    """

    def __init__(self, path: str | Path = ":memory:") -> None:
        self.path = str(path)
        self._in_memory = self.path == ":memory:"
        self._lock = threading.Lock()
        self._mirror: _Mirror | None = None
        if not self._in_memory:
            inspect_ledger_file(self.path)  # never touch a file that is not ours
        try:
            # Autocommit mode: transactions are explicit, so each record() is one commit.
            # The app may touch the ledger from Streamlit's worker threads; the lock
            # serialises that.
            self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise LedgerError(f"{self.path}: cannot open the ledger: {exc}") from None
        try:
            self._configure()
            self._ensure_schema()
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise LedgerError(f"{self.path}: not a usable gpuplan ledger: {exc}") from None
        except LedgerError:
            self._conn.close()
            raise

    @classmethod
    def open_read_only(cls, path: str | Path) -> Ledger:
        """An existing ledger file, opened for reading only (``gpuplan status``, the app).

        It never creates the file or changes it, and a live run may keep appending
        while it is open (WAL: readers and the writer do not block each other).

        Raises
        ------
        LedgerError
            When the file does not exist or is not a gpuplan ledger (names the file).
        """
        source = Path(path)
        if source.is_dir():
            raise LedgerError(f"{source}: is a directory, not a ledger file")
        if not source.is_file():
            raise LedgerError(f"{source}: no such ledger file")
        inspect_ledger_file(source)  # refuse another application's file before opening it
        try:
            return cls._read_only(source, immutable=False)
        except sqlite3.OperationalError as exc:
            # A WAL ledger with no writer attached has no -shm file, and a reader that may
            # not create one (a user reading the service's ledger) cannot open it. With
            # no -wal file either, the database file is the whole ledger: read it as is.
            wal = beside_ledger(source, "-wal")
            if "readonly" not in str(exc) or wal.exists():
                raise LedgerError(f"{source}: cannot open the ledger: {exc}") from None
        try:
            return cls._read_only(source, immutable=True)
        except sqlite3.OperationalError as exc:
            raise LedgerError(f"{source}: cannot open the ledger: {exc}") from None

    @classmethod
    def _read_only(cls, source: Path, *, immutable: bool) -> Ledger:
        conn = sqlite3.connect(
            f"{source.resolve().as_uri()}?mode=ro{'&immutable=1' if immutable else ''}", uri=True,
            isolation_level=None, check_same_thread=False,
        )
        ledger = cls._wrap(conn)
        ledger.path = str(source)
        try:
            conn.execute("PRAGMA busy_timeout=5000")
            ledger._ensure_schema()
        except sqlite3.OperationalError:
            conn.close()
            raise
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise LedgerError(f"{source}: not a usable gpuplan ledger: {exc}") from None
        except LedgerError:
            conn.close()
            raise
        return ledger

    @classmethod
    def _wrap(cls, conn: sqlite3.Connection) -> Ledger:
        ledger = cls.__new__(cls)
        ledger.path = ":memory:"
        ledger._in_memory = True
        ledger._lock = threading.Lock()
        ledger._conn = conn
        ledger._mirror = None
        return ledger

    def _configure(self) -> None:
        if self._in_memory:
            return
        mode = self._conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise LedgerError(f"{self.path}: cannot switch the ledger to WAL mode (got {mode!r})")
        # FULL, not NORMAL: NORMAL survives a process crash but may lose the last commits
        # on power loss; the ledger is written once per epoch, so the fsync is cheap.
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.execute("PRAGMA busy_timeout=5000")

    def _ensure_schema(self) -> None:
        tables = {
            row[0]
            for row in self._conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        if not tables:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                # Another process may have created the schema while we waited for the lock.
                if not self._conn.execute("SELECT 1 FROM sqlite_master WHERE type='table'").fetchone():
                    for statement in _SCHEMA:
                        self._conn.execute(statement)
                    self._conn.execute(
                        "INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,)
                    )
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        _check_schema(self._conn, self.path)

    # -- writing -----------------------------------------------------------------------

    def record(self, usages: Iterable[Usage]) -> int:
        """Append records in one transaction; return how many were written.

        When this returns, the records are committed (on disk for a file ledger).

        Raises
        ------
        ValueError
            A record with ``end <= start``, a negative or non-finite amount, or an
            empty project name; nothing of the batch is written.
        """
        rows = [_row(u) for u in usages]
        if not rows:
            return 0
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany(
                    f"INSERT INTO usage ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)", rows
                )
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        return len(rows)

    # -- reading -----------------------------------------------------------------------

    def window_totals(self, start: float, end: float) -> dict[str, Totals]:
        """Per-project sums of every column over ``[start, end)``.

        A record that straddles a window edge counts in proportion to its overlap (usage
        is taken as uniform within a record), so standings do not jump when an interval
        slides out of the lookback window.
        """
        if end <= start:
            return {}
        with self._lock:
            mirror = self._sync()
        return mirror.window_totals(float(start), float(end))

    def _sync(self) -> _Mirror:
        """Bring the in-process mirror up to date with the database (new rows only).

        Summing a week of hourly records for 150 projects in SQL took ~25 ms; the
        simulator asks every simulated hour. Records are append-only with increasing
        ids, so fetching the rows past the last id seen keeps a numpy mirror exact, also
        when another process appends to the same file.
        """
        mirror = self._mirror
        if mirror is None:
            mirror = self._mirror = _Mirror()
        rows = self._conn.execute(
            f"SELECT id, {_COLUMNS} FROM usage WHERE id > ? ORDER BY id", (mirror.last_id,)
        ).fetchall()
        if rows:
            mirror.extend(rows)
        return mirror

    def records(
        self, project: str | None = None, start: float | None = None, end: float | None = None
    ) -> list[Usage]:
        """Records in insertion order, optionally of one project and overlapping a window."""
        where = []
        params: dict[str, object] = {}
        if project is not None:
            where.append("project = :p")
            params["p"] = project
        if start is not None:
            where.append("t_end > :s")
            params["s"] = float(start)
        if end is not None:
            where.append("t_start < :e")
            params["e"] = float(end)
        sql = f"SELECT {_COLUMNS} FROM usage"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id"
        with self._lock:
            return [Usage(*row) for row in self._conn.execute(sql, params)]

    def span(self) -> tuple[float, float] | None:
        """``(earliest start, latest end)`` of the records, or ``None`` when empty."""
        with self._lock:
            row = self._conn.execute("SELECT MIN(t_start), MAX(t_end) FROM usage").fetchone()
        return None if row[0] is None else (float(row[0]), float(row[1]))

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM usage").fetchone()[0])

    # -- copies and lifetime -------------------------------------------------------------

    def what_if(self) -> Ledger:
        """An in-memory copy of this ledger; writing to it never touches this one."""
        target = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        with self._lock:
            self._conn.backup(target)
        return Ledger._wrap(target)

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __iter__(self) -> Iterator[Usage]:
        return iter(self.records())

    def __repr__(self) -> str:
        return f"Ledger({self.path!r})"


class _Mirror:
    """The ledger's records as numpy arrays, for fast window sums.

    The arrays grow by doubling (appending a slice's records costs what they are, not
    the whole history). ``reach[i]`` is the latest end among records ``0..i``: records
    are appended roughly in time order, so a window skips, by bisection, the prefix of
    records that all ended before it (the rows summed, and their order, are the same
    as a scan of every record). Each project's running sums over every record answer a
    window that holds every record whole (a lookback as long as the run so far: the
    simulator's first week asks that at every charge point) without a scan: added in
    record order from 0, they are the very floats the scan's ``bincount`` gives.
    """

    def __init__(self) -> None:
        self.last_id = 0
        self.codes: dict[str, int] = {}
        self.names: list[str] = []
        self.n = 0
        self._project = np.zeros(0, dtype=np.intp)
        self._start = np.zeros(0)
        self._end = np.zeros(0)
        self._reach = np.zeros(0)
        self._values = np.zeros((4, 0))  # one row per column: contiguous sums
        self._sums: list[list[float]] = [[], [], [], []]  # per column, per project code
        self._first_start = math.inf  # the earliest start of any record

    def _grow(self, need: int) -> None:
        size = max(need, 2 * len(self._start), 1024)
        n = self.n

        def grown(old: np.ndarray) -> np.ndarray:
            new = np.zeros((*old.shape[:-1], size), dtype=old.dtype)
            new[..., :n] = old[..., :n]
            return new

        self._project, self._start, self._end = grown(self._project), grown(self._start), grown(self._end)
        self._reach, self._values = grown(self._reach), grown(self._values)

    def extend(self, rows: list[tuple[Any, ...]]) -> None:
        codes = self.codes
        for row in rows:
            if row[1] not in codes:
                codes[row[1]] = len(self.names)
                self.names.append(row[1])
        self.last_id = int(rows[-1][0])
        n, k = self.n, len(rows)
        if n + k > len(self._start):
            self._grow(n + k)
        self._project[n : n + k] = [codes[r[1]] for r in rows]
        self._start[n : n + k] = [r[2] for r in rows]
        ends = np.array([r[3] for r in rows], dtype=float)
        self._end[n : n + k] = ends
        if n:
            ends[0] = max(ends[0], self._reach[n - 1])
        self._reach[n : n + k] = np.maximum.accumulate(ends)
        values = np.array([r[4:8] for r in rows], dtype=float)
        self._values[:, n : n + k] = values.T
        self.n = n + k
        sums = self._sums
        for column in sums:
            column.extend([0.0] * (len(self.names) - len(column)))
        a, b, c, d = sums
        for r, (va, vb, vc, vd) in zip(rows, values.tolist(), strict=True):
            code = codes[r[1]]
            a[code] += va
            b[code] += vb
            c[code] += vc
            d[code] += vd
        self._first_start = min(self._first_start, float(self._start[n : n + k].min()))

    def window_totals(self, start: float, end: float) -> dict[str, Totals]:
        hi = self.n
        if hi and self._first_start >= start and self._reach[hi - 1] <= end:
            # Every record lies whole inside: its fraction is 1, the sums are the totals.
            a, b, c, d = self._sums
            return {name: Totals(a[i], b[i], c[i], d[i]) for i, name in enumerate(self.names)}
        # Records before ``lo`` all ended by ``start``: none of them is inside.
        lo = int(np.searchsorted(self._reach[:hi], start, side="right"))
        s, e = self._start[lo:hi], self._end[lo:hi]
        project = self._project[lo:hi]
        values = self._values[:, lo:hi]
        inside = (e > start) & (s < end)
        if not inside.all():  # (records out of time order: pick the inside ones)
            if not inside.any():
                return {}
            s, e, project, values = s[inside], e[inside], project[inside], values[:, inside]
        fraction = (np.minimum(e, end) - np.maximum(s, start)) / (e - s)
        n = len(self.names)
        # As lists of Python floats (the same values as float() of each element).
        a, b, c, d = (
            np.bincount(project, weights=values[k] * fraction, minlength=n).tolist() for k in range(4)
        )
        present = (np.bincount(project, minlength=n) > 0).tolist()
        names = self.names
        return {names[i]: Totals(a[i], b[i], c[i], d[i]) for i in range(n) if present[i]}


def _row(u: Usage) -> tuple[str, float, float, float, float, float, float]:
    charged = u.allocated_gpu_h if u.charged_gpu_h is None else u.charged_gpu_h
    start, end, allocated, unallocated, owed = (
        u.start, u.end, u.allocated_gpu_h, u.unallocated_gpu_h, u.owed_gpu_h
    )
    # The common case, accepted at once: six floats, none negative but the times, their
    # sum finite (so is each), a project, and an end after the start. Anything else
    # takes the checks below, which say what is wrong.
    if (
        type(start) is float and type(end) is float and type(allocated) is float
        and type(charged) is float and type(unallocated) is float and type(owed) is float
        and allocated >= 0.0 and charged >= 0.0 and unallocated >= 0.0 and owed >= 0.0
        and math.isfinite(start + end + allocated + charged + unallocated + owed)
        and u.project and start < end
    ):
        return (u.project, start, end, allocated, charged, unallocated, owed)
    values = {
        "start": u.start,
        "end": u.end,
        "allocated_gpu_h": u.allocated_gpu_h,
        "charged_gpu_h": charged,
        "unallocated_gpu_h": u.unallocated_gpu_h,
        "owed_gpu_h": u.owed_gpu_h,
    }
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise ValueError(f"usage of {u.project!r}: {name} must be a finite number, got {value!r}")
        if name not in ("start", "end") and value < 0:
            raise ValueError(f"usage of {u.project!r}: {name} must not be negative, got {value!r}")
    if not u.project:
        raise ValueError("usage: project must be a non-empty project path")
    if u.end <= u.start:
        raise ValueError(f"usage of {u.project!r}: end ({u.end}) must be after start ({u.start})")
    return (
        u.project,
        float(u.start),
        float(u.end),
        float(u.allocated_gpu_h),
        float(charged),
        float(u.unallocated_gpu_h),
        float(u.owed_gpu_h),
    )
