"""Errors the CLI turns into exit code 2 with one message."""

from models.errors import GpuplanError


class UsageError(GpuplanError):
    """Bad arguments or input that is not a scenario file (the message names what)."""
