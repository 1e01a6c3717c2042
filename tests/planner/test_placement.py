import pytest

from planner.placement import gpus_taken, holds_up_drain, nodes_needed, per_node_gpus, place_gang

SIZE = {"a": 8, "b": 8, "c": 8}


def test_small_gang_best_fit() -> None:
    """A gang that fits one node goes to the fullest node with room."""
    assert place_gang({"a": 8, "b": 3, "c": 8}, SIZE, 2) == ("b",)


def test_small_gang_prefers_previous_node() -> None:
    """A job keeps its previous node when it still fits there."""
    assert place_gang({"a": 8, "b": 3, "c": 8}, SIZE, 2, prefer=["c"]) == ("c",)


def test_multi_node_gang_takes_whole_empty_nodes() -> None:
    """A gang larger than a node takes whole empty nodes only."""
    assert place_gang({"a": 8, "b": 3, "c": 8}, SIZE, 16) == ("a", "c")
    assert place_gang({"a": 8, "b": 3, "c": 8}, SIZE, 24) is None


def test_small_gang_ties_go_to_the_node_with_least_to_spare() -> None:
    """Among nodes that fit equally well, the one with the fewest GPUs free outside the
    gang's time goes first (name only breaks what is left)."""
    assert place_gang({"a": 8, "b": 8, "c": 8}, SIZE, 2, spare={"a": 16, "b": 0, "c": 8}) == ("b",)
    # Best fit still comes first: c has less room now, whatever it has later.
    assert place_gang({"a": 8, "b": 8, "c": 3}, SIZE, 2, spare={"a": 16, "b": 0, "c": 24}) == ("c",)


def test_multi_node_gang_takes_the_whole_nodes_with_least_to_spare() -> None:
    """A multi-node gang takes, of the whole empty nodes, those freest elsewhere last."""
    free = {"a": 8, "b": 8, "c": 8}
    assert place_gang(free, SIZE, 16, spare={"a": 16, "b": 0, "c": 0}) == ("b", "c")
    assert place_gang(free, SIZE, 16) == ("a", "b")


def test_no_hole_of_gang_shape() -> None:
    """Enough free GPUs spread over nodes is not a hole for a single-node gang."""
    assert place_gang({"a": 4, "b": 4}, {"a": 8, "b": 8}, 8) is None


def test_gpus_taken_rounds_multi_node_up() -> None:
    """A 12-GPU gang on 8-GPU nodes blocks two whole nodes."""
    assert nodes_needed(12, 8) == 2
    assert gpus_taken(12, 8) == 16
    assert gpus_taken(6, 8) == 6


def test_a_gang_takes_its_gpus_on_one_node_and_whole_nodes_on_several() -> None:
    assert per_node_gpus(3, ("n0",), 8) == 3
    assert per_node_gpus(12, ("n0", "n1"), 8) == 8


@pytest.mark.parametrize(
    ("window", "contract", "held_up"),
    [(3600.0, 7200.0, True), (3700.0, 3600.0, False), (100.0, 7200.0, False),
     (7199.0, 7200.0, True), (3600.0, 0.0, False)],
)
def test_a_start_holds_a_drain_up_only_while_its_contract_would_run(window, contract, held_up):
    """Started at 100 s: a window opening after the start and before the contract's end
    would wait for it; one that is open already, or opens as the contract ends, not."""
    assert holds_up_drain(window, 100.0, contract) is held_up
