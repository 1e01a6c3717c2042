"""Where results go: one durable Parquet file per finished point, and the whole sweep."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scenarios.files import probe_writable
from scenarios.sweep.errors import (
    ELAPSED_COLUMN,
    ERROR_COLUMN,
    POINT_COLUMN,
    POLICY_COLUMN,
    SweepError,
)

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger("scenarios.sweep")


#: The combined files of the whole sweep, in the output folder.
COMBINED = ("results.csv", "results.parquet")


class PointStore:
    """One Parquet file per finished point under ``DIR/points/``, plus combined files.

    Each file is written to a temporary name, flushed to disk and renamed, so a crash
    leaves either the whole file or nothing (and no temporary file). A folder or file
    that cannot be written is a :class:`SweepError` naming it; the folder is checked
    when the store is opened, before any point runs.
    """

    def __init__(self, out: str | Path) -> None:
        self.dir = Path(out)
        self.points_dir = self.dir / "points"
        try:
            self.points_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SweepError(self.dir, f"cannot create the output folder: {_reason(exc)}") from None
        self._check_writable()

    def _check_writable(self) -> None:
        """Fail now, not after hours of points, if the results cannot be written."""
        for folder in (self.dir, self.points_dir):
            try:
                probe_writable(folder)
            except OSError as exc:
                raise SweepError(folder, f"cannot write in this folder: {_reason(exc)}") from None
        for name in COMBINED:
            if (self.dir / name).is_dir():
                raise SweepError(self.dir, f"cannot write {name}: it is a folder")

    def path(self, key: str) -> Path:
        return self.points_dir / f"{key}.parquet"

    def finished(self, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Rows of the points among ``keys`` that already ran without error."""
        out: dict[str, dict[str, Any]] = {}
        for key in keys:
            path = self.path(key)
            if not path.exists():
                continue
            try:
                rows = _pandas().read_parquet(path).to_dict("records")
            except Exception as exc:  # an unreadable file is recomputed, not fatal
                log.warning("ignoring unreadable result file %s: %s", path, exc)
                continue
            if rows and _pandas().isna(rows[0].get(ERROR_COLUMN)):
                out[key] = {str(k): v for k, v in rows[0].items()}
                out[key][ERROR_COLUMN] = None
        return out

    def save(self, row: Mapping[str, Any]) -> None:
        """Write one point's row durably (temporary file, fsync, rename).

        A value Parquet cannot store (a list mixing numbers and text) is stored as its
        JSON text; the sweep puts the point's own grid values back when it reads the
        row (:meth:`finished`). Raises :class:`SweepError` naming the file when it
        cannot be written.
        """
        final = self.path(str(row[POINT_COLUMN]))
        frame = _frame([dict(row)])
        self._write(final, lambda fh: _to_parquet(frame, fh), f"points/{final.name}")
        _fsync_dir(self.points_dir)

    def combine(self, frame: pd.DataFrame) -> list[Path]:
        """Write ``results.csv`` and ``results.parquet`` of the whole sweep (each
        durably, as :meth:`save`). Raises :class:`SweepError` naming the file when it
        cannot be written."""
        csv, parquet = (self.dir / name for name in COMBINED)
        self._write(csv, lambda fh: frame.to_csv(fh, index=False), csv.name)
        self._write(parquet, lambda fh: _to_parquet(frame, fh), parquet.name)
        _fsync_dir(self.dir)
        return [csv, parquet]

    def _write(self, final: Path, write: Callable[[Any], object], name: str) -> None:
        """``write(binary file)`` to a temporary name next to ``final``, flushed and
        renamed over it; the temporary file never outlives a failure."""
        tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
        try:
            with open(tmp, "wb") as fh:
                write(fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, final)
        except OSError as exc:
            raise SweepError(self.dir, f"cannot write {name}: {_reason(exc)}") from None
        finally:
            with contextlib.suppress(OSError):  # a folder that refuses even that holds no file
                tmp.unlink(missing_ok=True)


def _reason(exc: OSError) -> str:
    """``Permission denied``: the system's words for ``exc``, without the path (the
    message names the file itself); pyarrow's errors carry long texts of their own."""
    if exc.errno is not None:
        return os.strerror(exc.errno)
    return exc.strerror or str(exc)


def _to_parquet(frame: pd.DataFrame, target: Any) -> None:
    """``frame`` as Parquet; object columns Parquet has no type for (a column that mixes
    ``2`` and ``"3d"``, a list mixing numbers and text) hold their values as text."""
    try:
        frame.to_parquet(target, index=False)
        return
    except (ValueError, TypeError):  # pyarrow's ArrowInvalid / ArrowTypeError
        if hasattr(target, "seek"):
            target.seek(0)
            target.truncate()
    text = frame.copy()
    for column in text.columns:
        if text[column].dtype == object:
            text[column] = text[column].map(_as_text).astype(object)
    text.to_parquet(target, index=False)


def _as_text(value: Any) -> str | None:
    """A cell as text: ``None`` and text as they are, numbers and lists as JSON."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        value = value.tolist()
    return json.dumps(value, default=str)


def _pandas() -> Any:
    import pandas

    return pandas


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems cannot sync a folder; the rename is still atomic
    finally:
        os.close(fd)


def _frame(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Rows as a frame; columns in first-seen order with elapsed time last."""
    columns: dict[str, None] = {POINT_COLUMN: None}
    for row in rows:
        for column in row:
            if column != ELAPSED_COLUMN:
                columns[column] = None
    columns.setdefault(POLICY_COLUMN, None)
    columns.setdefault(ERROR_COLUMN, None)
    columns[ELAPSED_COLUMN] = None
    frame: pd.DataFrame = _pandas().DataFrame([dict(r) for r in rows], columns=list(columns))
    # pandas turns None into NaN next to strings; keep None so `error is None` holds.
    errors = frame[ERROR_COLUMN].astype(object)
    frame[ERROR_COLUMN] = errors.where(errors.notna(), None)
    return frame


