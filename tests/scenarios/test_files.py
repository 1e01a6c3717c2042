"""Input files: only regular UTF-8 files within the size limit; YAML bounded and strict."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from models.limits import MAX_ALIAS_EXPANSION, MAX_YAML_DEPTH
from scenarios import ScenarioError, load_scenario
from scenarios.files import read_text

TINY = (Path(__file__).resolve().parents[2] / "scenarios" / "tiny.yaml").read_text()


def _error(path: Path, data: bytes | str) -> str:
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    return str(info.value)


# -- class 1: decoding ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (TINY.encode() + "# Zürich\n".encode("latin-1"), "not UTF-8 text (line 33"),
        (TINY.encode("utf-16"), "UTF-16 text: save it as UTF-8"),
        (TINY.encode("utf-16-be"), "a NUL character: this is not a text file"),
        (bytes(range(128, 256)) * 4, "not UTF-8 text (line 1, byte 0)"),
        (b"name: x\x00\n", "line 1: a NUL character"),
    ],
)
def test_a_file_that_is_not_utf8_is_one_error_naming_it(tmp_path: Path, data: bytes, needle: str) -> None:
    """Latin-1, UTF-16 and random bytes are refused with the file, the line and what to do."""
    text = _error(tmp_path / "s.yaml", data)
    assert text.startswith(f"{tmp_path / 's.yaml'}: ") and needle in text


def test_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    """A UTF-8 BOM (as some editors write) is dropped, not read as part of a key."""
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + TINY.encode())
    assert load_scenario(path).name == "tiny"


# -- class 3: unbounded reads ----------------------------------------------------------


def test_a_device_is_refused_before_reading(tmp_path: Path) -> None:
    """/dev/zero never ends: it is refused by its type, not read."""
    with pytest.raises(ScenarioError, match="/dev/zero: cannot read file: not a regular file"):
        load_scenario("/dev/zero")


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    """Opening a pipe with no writer would block for ever; it is refused on its type."""
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    with pytest.raises(ScenarioError, match="not a regular file"):
        load_scenario(fifo)


def test_a_file_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    """A file past the limit names its size and the limit."""
    path = tmp_path / "big.yaml"
    path.write_text("# " + "x" * 2000 + "\n")
    with pytest.raises(ScenarioError, match=r"big.yaml: the file is 0.0 MiB, above the limit of 0.00\d+ MiB"):
        read_text(path, limit=1000)


def test_a_directory_is_named_as_one(tmp_path: Path) -> None:
    """A folder given as the scenario says it is a directory."""
    with pytest.raises(ScenarioError, match="it is a directory"):
        load_scenario(tmp_path)


# -- class 10: symlink messages ---------------------------------------------------------


def test_a_symlink_loop_is_not_reported_as_a_missing_file(tmp_path: Path) -> None:
    """Two links pointing at each other are reported as a loop."""
    (tmp_path / "a.yaml").symlink_to(tmp_path / "b.yaml")
    (tmp_path / "b.yaml").symlink_to(tmp_path / "a.yaml")
    with pytest.raises(ScenarioError, match="a.yaml: cannot read: a symbolic link loop"):
        load_scenario(tmp_path / "a.yaml")


def test_a_dangling_symlink_says_so(tmp_path: Path) -> None:
    """A link to a missing file is named as such."""
    (tmp_path / "a.yaml").symlink_to(tmp_path / "gone.yaml")
    with pytest.raises(ScenarioError, match="a symbolic link to a file that does not exist"):
        load_scenario(tmp_path / "a.yaml")


# -- class 2: nesting and amplification ------------------------------------------------


def test_deep_nesting_is_refused_not_a_recursion_error(tmp_path: Path) -> None:
    """An org tree nested 400 levels deep fails with the depth limit, not RecursionError."""
    org = "".join(
        "{1}- name: u{0}\n{1}  share: 1\n{1}  children:\n".format(i, "  " * i) for i in range(400)
    )
    text = _error(tmp_path / "deep.yaml", "name: deep\nclusters: []\norg:\n" + org)
    assert f"nested deeper than {MAX_YAML_DEPTH} levels (the limit)" in text


def test_deep_flow_nesting_is_refused(tmp_path: Path) -> None:
    """Flow-style brackets nested thousands deep are refused just the same."""
    text = _error(tmp_path / "deep.yaml", "name: x\norg: " + "[" * 5000 + "]" * 5000 + "\n")
    assert "nested deeper than" in text and "line 2" in text


def test_an_alias_bomb_is_refused_before_expansion(tmp_path: Path) -> None:
    """Nine levels of ten aliases each (a billion nodes) is refused by the expansion limit."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    text = _error(tmp_path / "bomb.yaml", "\n".join(lines) + "\n")
    assert f"above the limit of {MAX_ALIAS_EXPANSION:,}" in text


def test_aliases_inside_children_are_refused(tmp_path: Path) -> None:
    """The issue's shape: aliases that multiply an org tree's children."""
    text = (
        "name: x\nclusters: [{name: c, node_groups: [{gpu_type: H100, nodes: 1}]}]\n"
        "u0: &u0 {name: p, share: 1}\n"
        + "".join(
            f"u{i}: &u{i} {{name: p, share: 1, children: [{', '.join([f'*u{i - 1}'] * 8)}]}}\n"
            for i in range(1, 8)
        )
        + "org: [*u7]\n"
    )
    assert "aliases expand the document" in _error(tmp_path / "bomb.yaml", text)


def test_a_chain_of_aliases_is_bounded_in_depth(tmp_path: Path) -> None:
    """Each alias one level inside the previous: shallow as written, deep once expanded."""
    text = "a0: &a0 [x]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 200))
    assert "deeper than" in _error(tmp_path / "chain.yaml", text)


def test_a_self_referencing_alias_is_refused(tmp_path: Path) -> None:
    """A node that contains itself would never finish validating."""
    assert "an alias refers to a node that contains it" in _error(tmp_path / "c.yaml", "a: &a [*a]\n")


def test_a_few_aliases_are_fine(tmp_path: Path) -> None:
    """Anchors that share a node group, as people use them, load."""
    text = TINY.replace(
        "node_groups: [{gpu_type: H100, nodes: 4, gpus_per_node: 8}]",
        "node_groups: [&g {gpu_type: H100, nodes: 4, gpus_per_node: 8}]",
    )
    path = tmp_path / "ok.yaml"
    path.write_text(text)
    assert load_scenario(path).clusters[0].node_groups[0].nodes == 4


# -- class 6: silent acceptance --------------------------------------------------------


def test_a_duplicate_key_is_refused_naming_both_lines(tmp_path: Path) -> None:
    """A second `clusters:` would silently replace the first; it is an error instead."""
    text = _error(tmp_path / "dup.yaml", TINY + "clusters: []\n")
    assert "line 33, column 1: duplicate key 'clusters' (first at line 5)" in text


def test_a_duplicate_key_in_a_nested_mapping_is_refused(tmp_path: Path) -> None:
    """Duplicates are refused at every level, not only the top."""
    text = _error(tmp_path / "dup.yaml", TINY.replace("{gpu_type: B200, nodes: 2}", "{gpu_type: B200, nodes: 2, nodes: 3}"))
    assert "duplicate key 'nodes'" in text


def test_merge_keys_may_be_overridden(tmp_path: Path) -> None:
    """`<<: *base` then a key of the base is YAML's override, not a duplicate."""
    text = TINY.replace(
        "node_groups: [{gpu_type: B200, nodes: 2}]",
        "node_groups: [{<<: {gpu_type: B200, nodes: 1}, nodes: 2}]",
    )
    path = tmp_path / "merge.yaml"
    path.write_text(text)
    assert load_scenario(path).clusters[1].node_groups[0].nodes == 2


def test_an_integer_of_thousands_of_digits_is_a_yaml_error(tmp_path: Path) -> None:
    """Python refuses to convert it; the error names the line and column."""
    assert "line 1, column 7: cannot read this value" in _error(tmp_path / "n.yaml", "name: " + "9" * 5000 + "\n")


def test_a_control_character_is_named_by_line_and_column(tmp_path: Path) -> None:
    """YAML's reader error (two lines, a character offset) becomes one line with a position."""
    text = _error(tmp_path / "c.yaml", b"name: tiny\nclusters: x\x16y\n")
    assert text.endswith("not valid YAML at line 2, column 12: the control character U+0016 is not allowed")


def test_a_huge_quoted_value_does_not_make_a_huge_message(tmp_path: Path) -> None:
    """A message quoting a 100 kB value from a damaged file is cut to one short line."""
    text = _error(tmp_path / "big.yaml", TINY.replace("gpu_type: B200", "gpu_type: " + "X" * 100_000))
    assert "unknown GPU type 'XXXX" in text and text.endswith("... (message cut)")
    assert len(text) <= ScenarioError.MAX_MESSAGE + len(str(tmp_path / "big.yaml")) + 2
