import pytest
import torch

from sgl.data import Graph, HeteroGraph
from sgl.data.placement import map_tensors, resolve_device
from sgl.errors import DeviceError
from sgl.samplers import Block, MiniBatch, NeighborSampler

NO_CUDA = not torch.cuda.is_available()


def make_graph():
    g = Graph.from_edge_index(torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]]), edge_weight=torch.tensor([1.0, 2, 3, 4]),
                              edge_attr=torch.ones(4, 2), x=torch.tensor([[0.5, 1.0], [2.0, 3.0], [4.0, 5.0]]),
                              y=torch.tensor([0, 1, 1]), val_mask=torch.tensor([False, True, False]), name="toy",
                              keep_order=True)
    g.ogb_name = "toy-ogb"
    g.node_year = torch.tensor([2000, 2001, 2002])
    g.edge_time = torch.arange(4.0)
    g.split = {"train": torch.tensor([0]), "rest": [torch.tensor([1]), torch.tensor([2])]}
    return g


def assert_same_graph(a, b):
    assert a.keys() == b.keys() and a.num_nodes == b.num_nodes
    assert torch.equal(a.indptr, b.indptr) and torch.equal(a.indices, b.indices)
    for key in a.keys():
        if isinstance(a[key], torch.Tensor):
            assert torch.equal(a[key], b[key]) and a[key].dtype == b[key].dtype, key
    assert torch.equal(a.input_edge_order, b.input_edge_order)
    assert torch.equal(a.split["train"], b.split["train"]) and torch.equal(a.split["rest"][1], b.split["rest"][1])


@pytest.mark.parametrize("device", ["cpu", torch.device("cpu"), "CPU", "auto"] if NO_CUDA else ["cpu"])
def test_to_cpu_round_trip_keeps_everything(device):
    g = make_graph()
    h = g.to(device)
    assert h is not g and type(h) is Graph and h.device == torch.device("cpu")
    assert_same_graph(h, g)
    assert g.to("cpu", non_blocking=True).ogb_name == "toy-ogb"
    assert_same_graph(g.cpu(), g)


def test_to_returns_a_new_graph_sharing_no_containers():
    g = make_graph()
    h = g.to("cpu")
    h.extra = 1
    h.split["new"] = torch.zeros(1)
    h.split["rest"].append(torch.zeros(1))
    assert "extra" not in g and "new" not in g.split and len(g.split["rest"]) == 2
    # tensors already on the device are reused (Tensor.to semantics) unless copy=True
    assert h.x.data_ptr() == g.x.data_ptr()
    c = g.to("cpu", copy=True)
    assert_same_graph(c, g)
    c.x.add_(1.0)
    c.node_year[0] = 0
    assert not torch.equal(c.x, g.x) and g.node_year[0] == 2000


def test_results_stay_usable():
    h = make_graph().to("cpu")
    del h.edge_time  # per-edge metadata: structural transforms drop it with a warning
    assert h.symmetrize().is_undirected() and h.add_self_loops().num_edges == 7
    assert h.subgraph(torch.tensor([2, 0])).node_year.tolist() == [2002, 2000]
    assert h.content_hash() == make_graph().content_hash()


def test_device_property_and_mixed_devices():
    g = make_graph()
    assert g.device == torch.device("cpu")
    meta = g.to("meta")  # a device without data: enough to see that every tensor moves
    assert meta.device.type == "meta" and meta.node_year.is_meta and meta.split["rest"][0].is_meta
    assert meta.input_edge_order.is_meta and meta.ogb_name == "toy-ogb" and meta.num_nodes == 3
    g.cached = torch.empty(3, device="meta")
    with pytest.raises(DeviceError, match=r"2 devices \(indptr on cpu, cached on meta\).*\.to\(device\)"):
        g.device


@pytest.mark.skipif(not NO_CUDA, reason="checks the error on a machine without CUDA")
def test_cuda_without_cuda_raises_device_error():
    g = make_graph()
    for call in (g.cuda, lambda: g.cuda(0), lambda: g.to("cuda"), lambda: g.to("cuda:1"), lambda: g.to(0)):
        with pytest.raises(DeviceError, match=r"torch.cuda.is_available\(\) is False"):
            call()


def test_bad_devices_and_flags():
    g = make_graph()
    with pytest.raises(DeviceError, match="cuda\\(\\) moves to a GPU"):
        g.cuda("cpu")
    with pytest.raises(DeviceError, match="invalid device 'tpu:x'"):
        g.to("tpu:x")
    with pytest.raises(DeviceError, match="float"):
        g.to(1.5)
    with pytest.raises(DeviceError, match="GPU index must be >= 0"):
        g.to(-1)
    with pytest.raises(DeviceError, match="non_blocking must be True or False"):
        g.to("cpu", non_blocking="yes")
    assert resolve_device(torch.device("meta")).type == "meta"


def test_pin_memory():
    g = make_graph()
    if torch.cuda.is_available():
        pinned = g.pin_memory()
        assert pinned.x.is_pinned() and pinned.node_year.is_pinned() and not g.x.is_pinned()
        assert_same_graph(pinned, g)
    else:  # pinning needs an accelerator: a clear sgl error, as PyG (torch) raises there too
        with pytest.raises(DeviceError, match="pin_memory\\(\\) needs an accelerator build"):
            g.pin_memory()


def test_hetero_graph_to_cpu():
    g = HeteroGraph.from_edge_index(
        {"paper": 3, "author": 2}, {("author", "writes", "paper"): torch.tensor([[0, 0, 1], [0, 1, 2]])},
        x_dict={"paper": torch.eye(3)}, target="paper", y=torch.tensor([0, 1, 0]),
        train_mask=torch.tensor([True, False, True]), name="tiny")
    g.ogb_name = "tiny-ogb"
    h = g.to("cpu")
    assert h is not g and h.device == torch.device("cpu") and repr(h) == repr(g)
    assert h.content_hash() == g.content_hash() and h.ogb_name == "tiny-ogb"
    assert torch.equal(h.edge_index(("author", "writes", "paper")), g.edge_index(("author", "writes", "paper")))
    h.x_dict["author"] = torch.ones(2, 1)
    assert g.featureless_types() == ["author"]  # the dicts are new
    meta = g.to("meta")
    assert meta.x.is_meta and meta.y.is_meta and all(t.is_meta for pair in meta._csr.values() for t in pair)
    assert g.cpu().add_reverse_relations().num_edges == 6
    if NO_CUDA:
        with pytest.raises(DeviceError):
            g.cuda()


def test_sampled_blocks_and_minibatches_to_cpu():
    graph = Graph.from_edge_index(torch.tensor([[0, 1, 2, 3, 1, 2, 4, 0], [1, 0, 1, 1, 2, 3, 2, 4]]))
    batch = NeighborSampler(graph, [2, 2]).sample(torch.tensor([1, 2]), seed=0)
    batch.x = torch.randn(batch.n_id.numel(), 3)
    moved = batch.to("cpu")
    assert isinstance(moved, MiniBatch) and moved is not batch and moved.device == torch.device("cpu")
    assert moved.blocks is not batch.blocks and all(isinstance(b, Block) for b in moved.blocks)
    for a, b in zip(moved.blocks, batch.blocks):
        assert a is not b and torch.equal(a.edge_index, b.edge_index) and a.size == b.size
    assert torch.equal(moved.n_id, batch.n_id) and torch.equal(moved.x, batch.x)
    assert torch.equal(moved.output_nodes, batch.output_nodes) and moved.batch_size == batch.batch_size
    meta = batch.to("meta")
    assert meta.n_id.is_meta and meta.blocks[0].edge_index.is_meta and meta.pruned.is_meta
    block = Block(torch.tensor([[1], [0]]), 2, 1, edge_weight=torch.tensor([0.5]))
    assert block.cpu().edge_weight.tolist() == [0.5] and block.to("meta").edge_weight.is_meta
    if NO_CUDA:
        with pytest.raises(DeviceError):
            block.cuda()
        with pytest.raises(DeviceError):
            batch.pin_memory()


def test_map_tensors_walks_containers():
    from collections import namedtuple

    Pair = namedtuple("Pair", "a b")
    out = map_tensors({"p": Pair(torch.ones(1), "s"), "l": [torch.zeros(1), 2]}, lambda t: t + 1)
    assert isinstance(out["p"], Pair) and out["p"].a.item() == 2.0 and out["p"].b == "s"
    assert out["l"][0].item() == 1.0 and out["l"][1] == 2
