"""Where results go: one durable Parquet file per finished point, and the whole sweep."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

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


class PointStore:
    """One Parquet file per finished point under ``DIR/points/``, plus combined files.

    Each point file is written to a temporary name, flushed to disk and renamed, so a
    crash leaves either the whole row or nothing.
    """

    def __init__(self, out: str | Path) -> None:
        self.dir = Path(out)
        self.points_dir = self.dir / "points"
        try:
            self.points_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SweepError(self.dir, f"cannot create the output folder: {exc.strerror}") from None

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
        """Write one point's row durably (temporary file, fsync, rename)."""
        final = self.path(str(row[POINT_COLUMN]))
        tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
        frame = _frame([dict(row)])
        with open(tmp, "wb") as fh:
            frame.to_parquet(fh, index=False)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
        _fsync_dir(self.points_dir)

    def combine(self, frame: pd.DataFrame) -> list[Path]:
        """Write ``results.csv`` and ``results.parquet`` of the whole sweep."""
        written = []
        csv = self.dir / "results.csv"
        frame.to_csv(csv, index=False)
        written.append(csv)
        parquet = self.dir / "results.parquet"
        try:
            frame.to_parquet(parquet, index=False)
        except (ValueError, TypeError, ImportError):
            # A grid column that mixes types (e.g. 2 and "3d") has no Parquet type.
            frame.astype({c: str for c in frame.columns if frame[c].dtype == object}).to_parquet(
                parquet, index=False
            )
        written.append(parquet)
        return written


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


