"""Any device (issue 37): no code under ``sgl/`` quietly assumes the CPU.

The test walks ``sgl/`` with :mod:`ast` and fails on

(a) ``.numpy()`` on an expression that is not immediately ``.cpu().numpy()`` (so also
    ``.detach().cpu().numpy()``): ``.numpy()`` raises on a tensor on a GPU;
(b) ``torch.device("cpu")`` and ``device="cpu"`` literals (in calls and as parameter defaults):
    a run follows the device of its model or data, never a hard-coded CPU;
(c) a tensor factory (``torch.zeros/ones/empty/full/arange/randn/rand/randint/tensor/eye/
    linspace``) without ``device=`` inside a ``forward`` method or a function whose name
    contains ``step`` or ``epoch`` (a training step): it would land on the CPU next to a model
    on a GPU.

Host-only code (file readers and writers, numba kernels, numpy-only modules, the device and
comm layers' own answers) is listed in :data:`ALLOWED` by ``(file, function)`` with a one-line
reason; ``"*"`` covers a whole module, and an entry covers the functions nested in it. An entry
that no longer matches anything is stale and fails the test too, so the list only shrinks.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "sgl"
FACTORIES = {"zeros", "ones", "empty", "full", "arange", "randn", "rand", "randint", "tensor", "eye", "linspace"}

_NUMBA = "numba kernel on CPU tensors only (its callers fall back to torch ops on other devices)"
_HOST_SAMPLER = "samplers run on the host: graph structure and seed ids are numpy arrays"
_STORE = "disk store: file reader/writer of host arrays"

#: (file relative to the repository, function qualname or "*") -> why it may do what the rules forbid
ALLOWED: Dict[Tuple[str, str], str] = {
    # -- the device and communication layers answer "the CPU" on purpose
    ("sgl/device.py", "_resolve"): "the device resolver itself turns 'cpu' into torch.device('cpu')",
    ("sgl/comm/_wire.py", "_comm_device"): "Gloo moves host tensors: the CPU is its wire device, not a default",
    ("sgl/comm/collectives.py", "wire_device"): "before init no backend moves anything: host tensors stay put",
    ("sgl/data/placement.py", "device_of"): "an object holding no tensors reports torch's default device, the CPU",
    ("sgl/data/csr.py", "csr_from_coo"): "scipy's coo_tocsr branch, taken only for tensors on the CPU",
    # -- file readers and writers
    ("sgl/analytics/edgelist.py", "load_edges"): "file reader: edge lists are parsed into host arrays",
    ("sgl/analytics/motifs/jobs.py", "save_embedding"): "file writer of a host embedding table",
    ("sgl/datasets/hetero_synthetic.py", "write_ogb_hetero_layout"): "file writer (OGB's csv.gz layout)",
    ("sgl/datasets/splits.py", "_labels"): "dataset split helper: labels are read as numpy on the host",
    ("sgl/samplers/store.py", "StoreWriter.add_node_array"): _STORE,
    ("sgl/samplers/store.py", "write_store"): _STORE,
    ("sgl/samplers/store.py", "FeatureStore.read"): _STORE,
    # -- numba / numpy / scipy / faiss host code
    ("sgl/analytics/motifs/adjacency.py", "simple_adjacency"): "motif counting is numba/scipy host code",
    ("sgl/analytics/vend/adjacency.py", "as_vertex_ids"): "VEND codes are numba/numpy host code",
    ("sgl/analytics/vend/adjacency.py", "as_edge_array"): "VEND codes are numba/numpy host code",
    ("sgl/analytics/vend/adjacency.py", "graph_csr"): "VEND codes are numba/numpy host code",
    ("sgl/analytics/motifs/distributed.py", "_as_edges"): "motif counting is numba host code: edges as numpy",
    ("sgl/federated/_projpert_numba.py", "projpert_iso_host"): _NUMBA,
    ("sgl/models/dropout.py", "_Dropout"): _NUMBA,
    ("sgl/models/dropout.py", "_seeds"): "seeds come from torch's default (CPU) generator, as numpy for numba",
    ("sgl/models/hetero/_packed_kernels.py", "_SubsetMix"): _NUMBA,
    ("sgl/models/hetero/_packed_kernels.py", "_HopPReLU"): _NUMBA,
    ("sgl/models/hetero/_packed_kernels.py", "gather_rows"): _NUMBA,
    ("sgl/models/gsl/knn.py", "KNNGraph.learn"): "faiss k-NN search runs on host arrays",
    ("sgl/samplers/dist_graph.py", "partition_nodes"): "partitioning (pymetis) runs on host arrays",
    ("sgl/samplers/distributed.py", "DistNeighborSampler.__init__"): "the Gloo wire device, as "
                                                                      "sgl.comm._wire._comm_device",
    ("sgl/samplers/distributed.py", "DistNeighborSampler.fetch"): _HOST_SAMPLER,
    ("sgl/samplers/loader.py", "NodeLoader.__init__"): _HOST_SAMPLER,
    ("sgl/samplers/subgraph.py", "_SubgraphSampler.__init__"): _HOST_SAMPLER,
    # -- propagation: the fused kernel and the streamed mode's matrix are host-side by design
    ("sgl/ops/_spmm_numba.py", "_store"): "the Python reference body of a numba store (host arrays)",
    ("sgl/ops/allocation.py", "empty_rows"): "allocates the CPU kernel's hop outputs in host memory, by design",
    ("sgl/ops/allocation.py", "calibrate_allocation"): "measures host-memory allocation for the CPU kernel",
    ("sgl/ops/kernels.py", "fused_adjacency"): _NUMBA,
    ("sgl/ops/kernels.py", "_np"): _NUMBA,
    ("sgl/ops/kernels.py", "_bits"): _NUMBA,
    ("sgl/ops/propagate.py", "propagate_hops"): "the fused kernel branch reads the host copy of the structure",
    ("sgl/ops/propagate.py", "_disk_apply"): "the fused kernel branch reads the host copy of the structure",
    ("sgl/ops/propagate.py", "_compute_to_disk"): "the file writer transposes a block already copied to the host",
    ("sgl/ops/propagate_device.py", "StreamedAdjacency"): "streamed mode: matrix and hops in (page-locked) host "
                                                           "memory, blocks sent through the device",
    ("sgl/ops/propagate_device.py", "streamed_adjacency"): "streamed mode builds its matrix in host memory",
    ("sgl/systems/runtime/config.py", "batch_for_step"): "token batches come from a seeded host generator so every "
                                                          "backend trains on the same numbers; moved to the device",
}

_FIX = {
    "numpy": "call .cpu().numpy() (or .detach().cpu().numpy()): .numpy() fails on a GPU tensor",
    "device-literal": "follow the model's or the data's device (sgl.device.get_device, tensor.device)",
    "factory": "pass device= (the model's or the batch's device) to the tensor factory in a training step",
}


def _is_cpu_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "cpu"


def _torch_attr(func: ast.AST, names: set) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr in names and isinstance(func.value, ast.Name)
            and func.value.id == "torch")


def _cpu_literal(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and \
        node.value.strip().lower().split(":")[0] == "cpu"


def _in_step(stack: List[Tuple[str, str]]) -> bool:
    return any(kind == "def" and (name == "forward" or "step" in name or "epoch" in name) for kind, name in stack)


def scan(source: str, filename: str = "<string>") -> List[Tuple[int, str, str]]:
    """``(line, function qualname or "<module>", rule)`` of every violation in ``source``.

    >>> scan("def forward(x):\\n    return torch.zeros(3) + x.numpy()")
    [(2, 'forward', 'factory'), (2, 'forward', 'numpy')]
    """
    hits: List[Tuple[int, str, str]] = []

    def qual(stack: List[Tuple[str, str]]) -> str:
        return ".".join(name for _, name in stack) or "<module>"

    def visit(node: ast.AST, stack: List[Tuple[str, str]]) -> None:
        for child in ast.iter_child_nodes(node):
            inner = stack
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner = stack + [("def", child.name)]
                args = child.args
                positional = args.posonlyargs + args.args
                defaults = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
                defaults += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
                hits.extend((child.lineno, qual(inner), "device-literal") for arg, default in defaults
                            if arg.arg == "device" and _cpu_literal(default))
            elif isinstance(child, ast.ClassDef):
                inner = stack + [("class", child.name)]
            elif isinstance(child, ast.Call):
                func = child.func
                if isinstance(func, ast.Attribute) and func.attr == "numpy" and not child.args \
                        and not _is_cpu_call(func.value):
                    hits.append((child.lineno, qual(stack), "numpy"))
                if (_torch_attr(func, {"device"}) and child.args and _cpu_literal(child.args[0])) or \
                        any(k.arg == "device" and _cpu_literal(k.value) for k in child.keywords):
                    hits.append((child.lineno, qual(stack), "device-literal"))
                if _torch_attr(func, FACTORIES) and _in_step(stack) and not any(k.arg == "device" for k in child.keywords):
                    hits.append((child.lineno, qual(stack), "factory"))
            visit(child, inner)

    visit(ast.parse(source, filename), [])
    return hits


def _allowed(path: str, function: str) -> Tuple[str, str] | None:
    for key in ((path, "*"),) + tuple((path, function.rsplit(".", n)[0]) for n in range(function.count(".") + 1)):
        if key in ALLOWED:
            return key
    return None


def _violations() -> Tuple[List[str], set]:
    found, used = [], set()
    for file in sorted(PACKAGE.rglob("*.py")):
        path = file.relative_to(ROOT).as_posix()
        for line, function, rule in scan(file.read_text(), path):
            key = _allowed(path, function)
            if key is not None:
                used.add(key)
            else:
                found.append(f"{path}:{line} in {function}: {rule} -- {_FIX[rule]}")
    return found, used


def test_no_code_assumes_the_cpu():
    found, _ = _violations()
    assert not found, ("code that assumes the CPU (fix it, or add (file, function) with a one-line reason to "
                       "ALLOWED if it is host-only):\n" + "\n".join(sorted(set(found))))


def test_every_allow_list_entry_is_used_and_says_why():
    _, used = _violations()
    stale = sorted(set(ALLOWED) - used)
    assert not stale, f"allow-list entries that match nothing any more (remove them): {stale}"
    for key, reason in ALLOWED.items():
        assert isinstance(reason, str) and reason.strip() and "\n" not in reason, f"{key} needs a one-line reason"


@pytest.mark.parametrize("source, rule", [
    ("x.numpy()", "numpy"),
    ("x.detach().numpy()", "numpy"),
    ("x.cpu().detach().numpy()", "numpy"),
    ("torch.device('cpu')", "device-literal"),
    ("x.to(device='cpu')", "device-literal"),
    ("def f(device='cpu'): pass", "device-literal"),
    ("def train_step(x):\n    return torch.ones(2)", "factory"),
    ("class M:\n    def forward(self, x):\n        def inner():\n            return torch.arange(3)", "factory"),
])
def test_each_rule_fires(source, rule):
    assert [hit[2] for hit in scan(source)] == [rule]


@pytest.mark.parametrize("source", [
    "x.cpu().numpy()",
    "x.detach().cpu().numpy()",
    "torch.device('cuda')",
    "def train_step(x):\n    return torch.ones(2, device=x.device)",
    "def helper():\n    return torch.zeros(3)",          # not a training step: may build host data
])
def test_device_generic_code_passes(source):
    assert scan(source) == []
