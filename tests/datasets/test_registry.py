import pytest

import sgl
from sgl.datasets import GraphDataset, list_datasets, load, register
from sgl.errors import ConfigError, DatasetError

EXPECTED = {
    "karate": "node", "synthetic": "node", "cora": "node", "citeseer": "node", "pubmed": "node",
    "cora-npz": "node", "amazon-computers": "node", "amazon-photo": "node", "coauthor-cs": "node",
    "coauthor-physics": "node", "texas": "node", "wisconsin": "node", "cornell": "node",
    "chameleon": "node", "squirrel": "node", "actor": "node", "mutag": "graph", "proteins": "graph",
    "ogbn-arxiv": "node", "ogbn-products": "node", "ogbn-papers100M": "node",
}


def test_list_contents():
    listed = {name: task for name, _, task in list_datasets()}
    for name, task in EXPECTED.items():
        assert listed[name] == task
    assert all(description for _, description, _ in list_datasets())


def test_unknown_name_suggests():
    with pytest.raises(DatasetError, match="Did you mean 'citeseer'") as err:
        load("citeser")
    assert "cora" in str(err.value) and "ogbn-arxiv" in str(err.value)
    with pytest.raises(DatasetError, match="unknown dataset 'zzzz'"):
        load("zzzz")


def test_case_insensitive_and_synthetic():
    assert load("KARATE").num_nodes == 34
    g = sgl.datasets.load("Synthetic", num_nodes=300, num_features=4, seed=2)
    assert g.num_nodes == 300 and g.num_features == 4


def test_bad_option():
    with pytest.raises(ConfigError, match="normalize_features"):
        load("cora", normalise_features=True)


def test_register_rules():
    with pytest.raises(ConfigError, match="already registered"):
        register("Cora", lambda root=None: None, "dup")
    with pytest.raises(ConfigError, match="task"):
        register("new-one", lambda root=None: None, "x", task="vision")
    with pytest.raises(ConfigError, match="callable"):
        register("new-one", 3, "x")


def test_registered_loader_gets_root(tmp_path):
    seen = {}

    def loader(root=None, scale=1):
        seen["root"], seen["scale"] = root, scale
        return scale

    register("Custom_Set", loader, "a custom loader", overwrite=True)
    assert load("custom-set", root=tmp_path, scale=3) == 3 and seen["root"] == tmp_path
    assert ("Custom_Set", "a custom loader", "node") in list_datasets()


def test_real_files_through_registry(data_path):
    assert load("cora", root=data_path("planetoid")).num_edges == 10556
    assert load("Cora-NPZ", root=data_path("gnn_benchmark_npz")).num_nodes == 2708
    assert load("texas", root=data_path("geomgcn"), split=5).num_nodes == 183
    ds = load("mutag", root=data_path("tu"))
    assert isinstance(ds, GraphDataset) and len(ds) == 188
    assert len(load("tu:PROTEINS", root=data_path("tu"))) == 1113
