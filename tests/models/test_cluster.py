from models import Cluster, Pool


def test_node_names_are_stable_and_per_type() -> None:
    """Nodes are named cluster-type-index with an index per GPU type, from 000."""
    c = Cluster.model_validate(
        {"name": "alpha", "node_groups": [{"gpu_type": "H100", "nodes": 2}, {"gpu_type": "B200", "nodes": 1, "gpus_per_node": 4}]}
    )
    assert [n.name for n in c.nodes()] == ["alpha-h100-000", "alpha-h100-001", "alpha-b200-000"]
    assert [n.gpus for n in c.nodes()] == [8, 8, 4]
    assert c.pools() == (Pool("alpha", "H100"), Pool("alpha", "B200"))
