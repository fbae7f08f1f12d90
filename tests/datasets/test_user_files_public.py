"""A new user's public files through `file:`: MUSAE (JSON features, string labels), SNAP (count header,
sparse ids), and the relabelling rules of sgl/datasets/user_ids.py."""
import json
import warnings

import numpy as np
import pytest
import torch

from sgl.cli.main import main
from sgl.data import Graph
from sgl.datasets import load, load_file
from sgl.errors import ConfigError, DatasetError
from sgl.tasks import run_provenance


def write(path, text):
    path.write_text(text)
    return path


@pytest.fixture
def musae(tmp_path):
    """Facebook page-page in MUSAE's three files (6 pages, 4 page types)."""
    write(tmp_path / "musae_edges.csv", "id_1,id_2\n0,1\n1,2\n2,3\n3,4\n4,5\n5,0\n0,3\n")
    features = {"0": [0, 7], "1": [3], "2": [7, 3, 1], "3": [], "4": [2], "5": [6, 0]}
    write(tmp_path / "musae_features.json", json.dumps(features))
    write(tmp_path / "musae_target.csv",
          "id,facebook_id,page_name,page_type\n"
          "0,145647315578475,The Voice,tvshow\n"
          "1,191483281412,U.S. Consulate General Mumbai,government\n"
          '2,144761358898518,"Mark Bailey MP - Labor for Miller, #1",politician\n'
          "3,568700043198473,Victor Dominello MP,politician\n"
          "4,1408935539376139,Jean-Claude Poitras,company\n"
          "5,134464673284112,Deputy Prime Minister,government\n")
    return tmp_path


def test_musae_json_features_and_string_labels(musae, tmp_path):
    g = load("file:musae_edges.csv", root=musae, features="musae_features.json", labels="musae_target.csv")
    assert (g.num_nodes, g.num_edges, g.num_features, g.num_classes) == (6, 14, 8, 4)
    expected = np.zeros((6, 8), dtype=np.float32)
    for node, ids in {0: [0, 7], 1: [3], 2: [7, 3, 1], 4: [2], 5: [6, 0]}.items():
        expected[node, ids] = 1
    assert torch.equal(g.x, torch.from_numpy(expected))
    assert g.label_names == ["company", "government", "politician", "tvshow"]   # sorted: deterministic
    assert g.y.tolist() == [3, 1, 2, 2, 0, 1] and g.node_ids.tolist() == list(range(6))
    g.save(tmp_path / "saved.pt")
    back = Graph.load(tmp_path / "saved.pt")
    assert back.label_names == g.label_names and torch.equal(back.node_ids, g.node_ids)
    assert run_provenance(g)["label_names"] == g.label_names
    # the column can be named; another column of the same file holds different "labels"
    by_name = load_file(musae / "musae_edges.csv", labels=musae / "musae_target.csv", label_column="page_type")
    assert by_name.y.tolist() == g.y.tolist()


def test_label_column_choice_and_errors(musae):
    write(musae / "two.csv", "id,page_type,category\n0,a,x\n1,b,y\n")
    with pytest.raises(DatasetError, match=r"several columns could hold the labels \(page_type, category\); its "
                                           r"columns are id, page_type, category. Pass label_column=NAME"):
        load_file(musae / "musae_edges.csv", labels=musae / "two.csv")
    assert load_file(musae / "musae_edges.csv", labels=musae / "two.csv", label_column="category",
                     relabel=False).label_names == ["x", "y"]
    with pytest.raises(DatasetError, match="no column named 'kind'; its columns are id, facebook_id, page_name, "
                                           "page_type"):
        load_file(musae / "musae_edges.csv", labels=musae / "musae_target.csv", label_column="kind")
    write(musae / "none.csv", "id,a,b\n0,1,2\n")
    with pytest.raises(DatasetError, match="no column is named like a label column"):
        load_file(musae / "musae_edges.csv", labels=musae / "none.csv")
    write(musae / "frac.txt", "0 1\n1 0.5\n")
    with pytest.raises(DatasetError, match=r"frac.txt line 2: the label is '0.5'"):
        load_file(musae / "musae_edges.csv", labels=musae / "frac.txt")
    with pytest.raises(ConfigError, match="pass labels=PATH too"):
        load_file(musae / "musae_edges.csv", label_column="page_type")


def test_headerless_string_labels_and_unlabeled(tmp_path):
    write(tmp_path / "e.txt", "0 1\n1 2\n2 3\n")
    write(tmp_path / "y.txt", "0 cat\n1 dog\n3 cat\n")  # node 2 unlabeled; "0 cat" is data, not a header
    g = load_file(tmp_path / "e.txt", labels=tmp_path / "y.txt", train_ratio=1.0, val_ratio=0.0)
    assert g.y.tolist() == [0, 1, -1, 0] and g.label_names == ["cat", "dog"] and g.split_sizes() == (3, 0, 0)


@pytest.mark.parametrize("text, message", [
    ('{"0": [1, 2], "1": [3,', "not valid JSON"),
    ('{"a": [1]}', "the key 'a' is not a node id"),
    ('{"0": [1, -2]}', r"node 0 has -2 where a list of feature ids"),
    ('{"0": "1 2"}', r"node 0 has '1 2' where a list of feature ids"),
    ('"features"', "the JSON holds a str"),
])
def test_malformed_json_features(tmp_path, text, message):
    write(tmp_path / "e.csv", "0,1\n")
    write(tmp_path / "f.json", text)
    with pytest.raises(DatasetError, match=message) as err:
        load_file(tmp_path / "e.csv", features=tmp_path / "f.json")
    assert "f.json" in str(err.value) and "MUSAE" in str(err.value)


SNAP = ("# Directed graph (each unordered pair of nodes is saved once): CA-GrQc.txt\n"
        "# Nodes: 4 Edges: 5\n"
        "# FromNodeId\tToNodeId\n"
        "4\t5\n"
        "10\t500\n"
        "500\t26196\n"
        "26196\t10\n"
        "10\t7\n"
        "7\t500\n")


def test_snap_count_header_and_relabelling(tmp_path):
    write(tmp_path / "ca.txt", SNAP)
    with pytest.warns(UserWarning, match=r"the first row '4 5' reads as a node and edge count"):
        g = load(f"file:{tmp_path / 'ca.txt'}")
    assert g.num_nodes == 4 and g.num_edges == 10            # today's code: 26,197 nodes and an edge 4-5
    assert g.node_ids.tolist() == [7, 10, 500, 26196]
    pairs = {(int(g.node_ids[s]), int(g.node_ids[d])) for s, d in g.edge_index.t().tolist()}
    assert (10, 500) in pairs and (26196, 10) in pairs and (4, 5) not in pairs
    with pytest.warns(UserWarning):
        raw = load_file(tmp_path / "ca.txt", relabel=False)
    assert (raw.num_nodes, raw.num_edges) == (26197, 10) and not hasattr(raw, "node_ids")   # no edge 4-5
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kept = load_file(tmp_path / "ca.txt", count_header=False)
    assert kept.num_nodes == 6 and 4 in kept.node_ids.tolist()


def test_count_header_rule():
    from sgl.datasets.user_ids import is_count_header

    src, dst = np.array([3, 0, 1, 2]), np.array([3, 1, 2, 0])
    assert is_count_header(src, dst)                                   # 3 nodes, 3 edges
    assert is_count_header(np.array([3, 0, 1, 2]), np.array([6, 1, 2, 0]))      # undirected pairs counted twice
    assert not is_count_header(np.array([0, 1, 2]), np.array([1, 2, 0]))        # a first edge 0-1
    assert not is_count_header(np.array([9, 0, 1, 2]), np.array([3, 1, 2, 0]))  # 9 > largest id + 1


def test_node_data_follows_the_relabelling(tmp_path):
    write(tmp_path / "e.txt", "10 500\n500 26196\n")
    write(tmp_path / "keyed.csv", "id,a\n26196,3\n10,1\n500,2\n")
    g = load_file(tmp_path / "e.txt", features=tmp_path / "keyed.csv")
    assert g.x[:, 0].tolist() == [1, 2, 3]
    np.save(tmp_path / "rank.npy", np.array([[1.0], [2.0], [3.0]]))   # one row per id: sorted-id order
    assert load_file(tmp_path / "e.txt", features=tmp_path / "rank.npy").x[:, 0].tolist() == [1, 2, 3]
    write(tmp_path / "y.txt", "7 1\n10 0\n")                            # node 7 exists only in the label file
    g = load_file(tmp_path / "e.txt", labels=tmp_path / "y.txt")
    assert g.node_ids.tolist() == [7, 10, 500, 26196] and g.y.tolist() == [1, 0, -1, -1]
    np.save(tmp_path / "short.npy", np.ones((100, 1)))                 # neither one row per id nor every id
    with pytest.raises(DatasetError, match="node id 26196 has no row in the feature file .100 rows."):
        load_file(tmp_path / "e.txt", features=tmp_path / "short.npy")
    with pytest.raises(ConfigError, match="implies relabel=False"):
        load_file(tmp_path / "e.txt", relabel=True, num_nodes=30000)


def test_cli_label_column_and_relabel_options(capsys, tmp_path):
    n, kinds = 30, ("tvshow", "government", "company")
    write(tmp_path / "edges.csv", "id_1,id_2\n" + "".join(f"{i},{(i + 3) % n}\n" for i in range(n)))
    write(tmp_path / "features.json", json.dumps({str(i): [i % 3, 3 + i % 5] for i in range(n)}))
    write(tmp_path / "target.csv", "id,facebook_id,page_name,page_type\n"
          + "".join(f"{i},{1000 + i},page {i},{kinds[i % 3]}\n" for i in range(n)))
    out = tmp_path / "run.json"
    assert main(["train", "--dataset", f"file:{tmp_path / 'edges.csv'}",
                 "--dataset-option", f"features={tmp_path / 'features.json'}",
                 "--dataset-option", f"labels={tmp_path / 'target.csv'}", "--dataset-option", "label-column=page_type",
                 "--dataset-option", "relabel=false", "--seeds", "1", "--epochs", "2", "--no-progress",
                 "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["label_names"] == ["company", "government", "tvshow"]
    assert "30 nodes" in capsys.readouterr().out
