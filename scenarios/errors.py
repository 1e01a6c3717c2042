"""One clear error for bad scenario input, naming the file and the field path."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from models.errors import GpuplanError


class ScenarioError(GpuplanError):
    """Bad input. ``str()`` is the whole message the CLI prints (exit code 2)."""

    MAX_MESSAGE = 500
    """Longer messages are cut: a value quoted from a damaged file may be megabytes."""

    def __init__(self, file: str | Path | None, message: str) -> None:
        self.file = str(file) if file is not None else None
        if len(message) > self.MAX_MESSAGE:
            message = message[: self.MAX_MESSAGE - 20] + " ... (message cut)"
        self.message = message
        super().__init__(f"{self.file}: {message}" if self.file else message)


def field_path(loc: tuple[int | str, ...]) -> str:
    """``("clusters", 0, "node_groups")`` -> ``clusters[0].node_groups``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def from_validation_error(err: ValidationError, file: str | Path | None, prefix: str = "") -> ScenarioError:
    """The first error of ``err`` as a :class:`ScenarioError`, path first."""
    errors = err.errors(include_url=False)
    first = errors[0]
    msg = str(first["msg"])
    for lead in ("Value error, ", "Assertion failed, "):
        if msg.startswith(lead):
            msg = msg[len(lead) :]
    # Drop pydantic's tagged-union noise from locations (e.g. 'function-after[...]').
    loc = tuple(p for p in first["loc"] if not (isinstance(p, str) and "[" in p and "]" in p))
    path = field_path(loc)
    if prefix:
        path = prefix + ("." + path if path and not path.startswith("[") else path)
    text = f"{path}: {msg}" if path else msg
    if first["type"] in ("missing",):
        text = f"{path}: required field is missing"
    elif first["type"] == "extra_forbidden":
        text = f"{path}: unknown field"
    if len(errors) > 1:
        text += f" (and {len(errors) - 1} more error{'s' if len(errors) > 2 else ''})"
    return ScenarioError(file, text)
