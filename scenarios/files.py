"""Reading input files safely: bounded size, regular files only, UTF-8, bounded YAML.

Every file gpuplan reads as input (scenarios, sweep files, CSV jobs, Philly traces)
comes through here, so a device, a pipe, a huge file, a file in another encoding, a YAML
bomb or a duplicate key fails with one :class:`ScenarioError` naming the file, instead of
hanging, exhausting memory, or being half-read.
"""

from __future__ import annotations

import csv
import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from models.limits import MAX_ALIAS_EXPANSION, MAX_YAML_BYTES, MAX_YAML_DEPTH
from scenarios.errors import ScenarioError

_MIB = 1024 * 1024


def describe_os_error(exc: OSError) -> str:
    """A short reason for ``exc``: a symbolic link loop is not "no such file"."""
    if exc.errno == errno.ELOOP:
        return "a symbolic link loop (too many levels of symbolic links)"
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return "no such file"
    return exc.strerror or str(exc)


def probe_writable(folder: Path) -> None:
    """Write a file in ``folder`` and remove it, so that results that cannot be written
    there fail before the work that makes them, not after.

    Raises
    ------
    OSError
        Why not (the folder is read-only, full, or not a folder).
    """
    fd, probe = tempfile.mkstemp(prefix=".write-test-", dir=folder)
    os.close(fd)
    os.unlink(probe)


def check_readable_file(file: Path, limit: int, what: str = "") -> None:
    """Refuse what is not a regular file of at most ``limit`` bytes, before opening it.

    A pipe or device would block or never end (``/dev/zero``), so these are refused on
    their type, not after reading.
    """
    label = f"{what} " if what else ""
    try:
        info = os.stat(file)
    except OSError as exc:
        raise ScenarioError(file, f"cannot read {label}file: {describe_os_error(exc)}") from None
    if stat.S_ISDIR(info.st_mode):
        raise ScenarioError(file, f"cannot read {label}file: it is a directory")
    if not stat.S_ISREG(info.st_mode):
        raise ScenarioError(file, f"cannot read {label}file: not a regular file (a device or pipe?)")
    if info.st_size > limit:
        raise ScenarioError(file, _too_large(info.st_size, limit))


def _too_large(size: int, limit: int) -> str:
    return f"the file is {size / _MIB:.1f} MiB, above the limit of {limit / _MIB:g} MiB"


def read_bytes(file: Path, limit: int, what: str = "") -> bytes:
    """The content of a regular file of at most ``limit`` bytes."""
    check_readable_file(file, limit, what)
    try:
        with open(file, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise ScenarioError(file, f"cannot read: {describe_os_error(exc)}") from None
    if len(data) > limit:  # it grew since the check
        raise ScenarioError(file, _too_large(len(data), limit))
    return data


def decode_text(data: bytes, file: str | Path) -> str:
    """``data`` as UTF-8 text without a byte-order mark; other encodings are refused."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ScenarioError(file, "the file is UTF-16 text: save it as UTF-8")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ScenarioError(
            file, f"not UTF-8 text (line {line}, byte {exc.start}): save the file as UTF-8"
        ) from None
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise ScenarioError(file, f"line {line}: a NUL character: this is not a text file")
    return text.removeprefix("\ufeff")


def read_text(file: Path, limit: int = MAX_YAML_BYTES, what: str = "") -> str:
    """The UTF-8 text of a regular file of at most ``limit`` bytes."""
    return decode_text(read_bytes(file, limit, what), file)


def csv_problem(exc: Exception) -> str:
    """The csv module's error in words a user acts on."""
    text = str(exc)
    if "unexpected end of data" in text or "EOF inside string" in text:
        return 'a quoted field is never closed (an unterminated ")'
    if "field larger than field limit" in text:
        return f"a field is longer than {csv.field_size_limit():,} characters (the limit)"
    return f"not valid CSV: {text}"


class _Refused(yaml.MarkedYAMLError):
    """Valid YAML that gpuplan will not take (a duplicate key, past a limit)."""


class BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses duplicate keys and bounds nesting and aliases.

    - nesting deeper than :data:`MAX_YAML_DEPTH` collections (the composer is recursive
      and would otherwise end in ``RecursionError``);
    - aliases that expand the document by more than :data:`MAX_ALIAS_EXPANSION` nodes,
      or nest it deeper than the limit once expanded, or refer to themselves (a YAML
      "billion laughs" is a few hundred bytes and gigabytes once validated);
    - a key given twice in one mapping (the first value would be silently dropped);
      keys merged in with ``<<`` may be overridden, as YAML intends.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise _Refused(
                    None, None, f"nested deeper than {MAX_YAML_DEPTH} levels (the limit)",
                    self.peek_event().start_mark,  # type: ignore[no-untyped-call]
                )
            node: Node | None = super().compose_node(parent, index)
            return node
        finally:
            self._depth -= 1

    def get_single_node(self) -> Node | None:
        node: Node | None = super().get_single_node()
        if node is not None:
            _check_expansion(node)
        return node

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, ScalarNode):
                continue
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                first = seen[key].start_mark
                raise _Refused(
                    None, None,
                    f"duplicate key {key!r} (first at line {first.line + 1}); give each key once",
                    key_node.start_mark,
                )
            seen[key] = key_node
        out: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return out

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        # Python raises ValueError for ints of over 4,300 digits and for dates such as
        # 2024-13-45; give them the file position like any other YAML error.
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, OverflowError) as exc:
            raise _Refused(None, None, f"cannot read this value: {exc}", node.start_mark) from None


def _check_expansion(root: Node) -> None:
    """Refuse aliases that blow the document up, nest it too deep, or make it cyclic.

    Walks the node graph once, remembering each node's expanded size and height, so the
    walk is linear in the nodes written and its recursion never passes the depth limit.
    """
    seen: dict[int, tuple[int, int]] = {}  # id -> (expanded size, expanded height)
    active: set[int] = set()

    def too_deep(node: Node) -> _Refused:
        return _Refused(
            None, None,
            f"nested deeper than {MAX_YAML_DEPTH} levels once aliases are expanded (the limit)",
            node.start_mark,
        )

    def visit(node: Node, depth: int) -> tuple[int, int]:
        key = id(node)
        if key in active:
            raise _Refused(None, None, "an alias refers to a node that contains it", node.start_mark)
        if key in seen:
            size, height = seen[key]
            if depth + height - 1 > MAX_YAML_DEPTH:
                raise too_deep(node)
            return size, height
        if depth > MAX_YAML_DEPTH:
            raise too_deep(node)
        children: list[Node] = []
        if isinstance(node, SequenceNode):
            children = list(node.value)
        elif isinstance(node, MappingNode):
            children = [n for pair in node.value for n in pair]
        active.add(key)
        size, height = 1, 1
        for child in children:
            child_size, child_height = visit(child, depth + 1)
            size += child_size
            height = max(height, child_height + 1)
        active.discard(key)
        seen[key] = (size, height)
        return size, height

    total, _ = visit(root, 1)
    added = total - len(seen)
    if added > MAX_ALIAS_EXPANSION:
        raise _Refused(
            None, None,
            f"aliases expand the document by {added:,} nodes, above the limit of "
            f"{MAX_ALIAS_EXPANSION:,}",
            root.start_mark,
        )


def parse_yaml_mapping(text: str, file: str | Path, expected: str) -> dict[str, Any]:
    """YAML text whose top level is a mapping; :class:`ScenarioError` naming ``file``
    (with the line and column of a syntax error) otherwise. ``expected`` says what the
    top level should be, for the error."""
    try:
        loader = BoundedLoader(text)
        try:
            data = loader.get_single_data()
        finally:
            loader.dispose()
    except _Refused as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ScenarioError(file, f"{where}{exc.problem}") from None
    except yaml.reader.ReaderError as exc:
        # Its str() is two lines and counts characters; give line and column instead.
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        raise ScenarioError(
            file, f"not valid YAML at line {line}, column {column}: the control character "
            f"U+{code:04X} is not allowed"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError(file, f"not valid YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        raise ScenarioError(file, f"expected {expected} at the top level")
    return data
