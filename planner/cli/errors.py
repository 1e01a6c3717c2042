"""Errors the CLI turns into exit code 2 with one message."""


class UsageError(Exception):
    """Bad arguments or input that is not a scenario file (the message names what)."""
