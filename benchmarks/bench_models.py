"""Scalable (SGAP) model vs full-batch message passing: precompute and per-epoch training time.

On one synthetic CSBM graph (:func:`sgl.datasets.csbm`), in one process, with the same
thread count for every method, this measures

* **precompute**: ``model.precompute(graph)`` — the SGAP model's parameter-free
  propagation; for GCN/GAT only packing features and edges;
* **epoch**: one optimisation pass as :class:`sgl.tasks.Trainer` makes it — for the SGAP
  model, Adam steps over the *training* rows of its precomputed features in mini-batches
  of its preset batch size; for GCN/GAT, one forward/backward over the *whole* graph
  (they must propagate every layer every step). The first epoch is a warm-up (allocator,
  lazy initialisation) and is excluded; the median of the timed epochs is reported;
* **test accuracy** after exactly ``--epochs`` epochs (no early stopping, no model
  selection), with each model's own optimiser preset (``default_train_config``).

The full-batch rows are :class:`sgl.models.message_passing.GCN`/``GAT``, which *are*
plain ``torch_geometric`` ``GCNConv``/``GATConv`` stacks with dropout in between;
``--pyg`` adds hand-written raw PyG stacks as a check that the wrappers cost nothing.

    python benchmarks/bench_models.py --model sgc            # 200k nodes, ~2M edges, 2 threads
    python benchmarks/bench_models.py --model gamlp --nodes 1000000 --epochs 5 --threads 16

``--time-to-acc`` (issue 27, item 3) instead races the SGL model against the mini-batch
baselines that fit at a million nodes, GraphSAGE and GAT trained through SGL's neighbour
sampler (``--fanouts``, the same for both; test nodes scored on sampled computation graphs
with ``--eval-fanouts``), and with ``--full-batch`` also full-batch GCN. The clock counts
precompute (propagation; the samplers' construction) and training (sampling included), not
scoring; each method is scored ``--evals-per-epoch`` times per epoch on one fixed subset of
``--score-nodes`` test nodes and its time to target is the clock at its first score reaching
``--target-acc`` (default the lowest best accuracy any method reached, so all reach it). The
SGL model runs ``--max-epochs`` first; each baseline stops once it reaches the SGL model's best,
which changes no time to target (see ``benchmarks/time_to_acc.py`` for the rules)::

    python benchmarks/bench_models.py --time-to-acc --model gamlp --nodes 1000000 --max-epochs 30 --threads 2
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any, Callable, Dict, List, Optional

import torch
import torch.nn.functional as F

import sgl
import sgl.models
from sgl.models.features import FullGraphInput, NodeFeatures, to_device
from sgl.models.message_passing import GAT, GCN, GATConfig, GCNConfig
from sgl.tasks import TrainConfig, Trainer, accuracy, seed_everything
from time_to_acc import race  # benchmarks/time_to_acc.py (the script's folder is on sys.path)


class _RawPyG(torch.nn.Module):
    """A textbook two-layer PyG model (as in PyG's ``examples/gcn.py``/``gat.py``)."""

    full_batch = True

    def __init__(self, kind: str, in_features: int, num_classes: int) -> None:
        super().__init__()
        from torch_geometric.nn import GATConv, GCNConv

        self.kind = kind
        if kind == "gcn":
            self.conv1, self.conv2, self.p = GCNConv(in_features, 16), GCNConv(16, num_classes), 0.5
        else:
            self.conv1 = GATConv(in_features, 8, heads=8, dropout=0.6)
            self.conv2 = GATConv(64, num_classes, heads=1, concat=False, dropout=0.6)
            self.p = 0.6

    def reset_parameters(self) -> None:
        self.conv1.reset_parameters()
        self.conv2.reset_parameters()

    def precompute(self, graph: Any, **kwargs: Any) -> FullGraphInput:
        return FullGraphInput(graph.x, graph.edge_index)

    def forward(self, inputs: FullGraphInput) -> torch.Tensor:
        act = F.relu if self.kind == "gcn" else F.elu
        x = F.dropout(inputs.x, p=self.p, training=self.training)
        x = act(self.conv1(x, inputs.edge_index))
        x = F.dropout(x, p=self.p, training=self.training)
        return self.conv2(x, inputs.edge_index)


def _epoch_fn(model: torch.nn.Module, features: Any, graph: Any, train_config: TrainConfig,
              seed: int) -> Callable[[], None]:
    """One training epoch exactly as :meth:`sgl.tasks.Trainer.fit` runs it (without validation)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=train_config.lr, weight_decay=train_config.weight_decay)
    train = graph.train_mask.nonzero().flatten()
    y = graph.y
    generator = torch.Generator().manual_seed(seed)
    batch = train_config.batch_size or train.numel()
    device = torch.device("cpu")

    def full_batch_epoch() -> None:
        model.train()
        optimizer.zero_grad()
        F.cross_entropy(model(features)[train], y[train]).backward()
        optimizer.step()

    def mini_batch_epoch() -> None:
        model.train()
        order = train[torch.randperm(train.numel(), generator=generator)]
        for i in range(0, order.numel(), batch):
            idx = order[i:i + batch]
            optimizer.zero_grad()
            F.cross_entropy(model(to_device(features[idx], device)), y[idx]).backward()
            optimizer.step()

    return full_batch_epoch if getattr(model, "full_batch", False) else mini_batch_epoch


def measure(label: str, build: Callable[[], torch.nn.Module], graph: Any, epochs: int,
            train_overrides: Dict[str, Any], seed: int = 0) -> Dict[str, Any]:
    seed_everything(seed)
    model = build()
    preset = {**getattr(model, "default_train_config", {}), **train_overrides}
    preset = {k: v for k, v in preset.items() if k in ("lr", "weight_decay", "batch_size")}
    train_config = TrainConfig(**preset, epochs=epochs, progress=False)
    start = time.perf_counter()
    features = model.precompute(graph)
    precompute_s = time.perf_counter() - start
    if isinstance(features, torch.Tensor):
        features = NodeFeatures(features)
    run_epoch = _epoch_fn(model, features, graph, train_config, seed)
    run_epoch()  # warm-up, not timed
    times: List[float] = []
    for _ in range(epochs):
        start = time.perf_counter()
        run_epoch()
        times.append(time.perf_counter() - start)
    logits = Trainer(train_config).predict_all(model, features, graph, torch.device("cpu"))
    test = graph.test_mask.nonzero().flatten()
    return {
        "model": label,
        "params": sum(p.numel() for p in model.parameters()),
        "batch_size": train_config.batch_size,
        "lr": train_config.lr,
        "precompute_s": precompute_s,
        "epoch_s": statistics.median(times),
        "total_s": precompute_s + sum(times),
        "test_acc": accuracy(logits[test], graph.y[test]),
    }


def _sgap_builder(name: str, graph: Any, options: Optional[Dict[str, Any]] = None) -> Callable[[], torch.nn.Module]:
    model_cls, config_cls, _ = sgl.models.MODELS[name.lower()]
    # CSBM features are Gaussian: their row sums can be ~0, so no row normalisation
    overrides = {"normalize_features": False} if "normalize_features" in config_cls.__dataclass_fields__ else {}
    config = sgl.models.model_config(name, **{**overrides, **(options or {})})
    return lambda: sgl.models.build_model(name, graph.num_features, graph.num_classes, config)


def _fanouts(text: str) -> List[int]:
    return [int(v) for v in text.split(",") if v]


def main(argv: Optional[List[str]] = None) -> List[Dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gamlp", help="SGL scalable model from sgl.models.MODELS")
    parser.add_argument("--nodes", type=int, default=200_000)
    parser.add_argument("--avg-degree", type=float, default=10.0)
    parser.add_argument("--features", type=int, default=128)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--train-frac", type=float, default=0.1,
                        help="fraction of nodes in the training split (a mini-batch epoch scales with it)")
    parser.add_argument("--epochs", type=int, default=10, help="timed epochs (after one warm-up epoch)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="mini-batch size of the SGL model (default: its preset, else all training nodes; "
                             "--time-to-acc: --sampled-batch)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--pyg", action="store_true", help="also time raw torch_geometric GCN/GAT stacks")
    parser.add_argument("--skip-gat", action="store_true", help="leave out GAT (the slowest by far)")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--model-option", action="append", default=[], metavar="KEY=VALUE",
                        help="override a field of the SGL model's config, e.g. dropout=0.5")
    parser.add_argument("--time-to-acc", action="store_true",
                        help="race to a fixed test accuracy vs mini-batch GraphSAGE/GAT through our sampler")
    parser.add_argument("--max-epochs", type=int, default=30, help="--time-to-acc: epochs per method at most")
    parser.add_argument("--target-acc", type=float, help="--time-to-acc: default the lowest best accuracy")
    parser.add_argument("--fanouts", type=_fanouts, default=[15, 10], help="sampled baselines' fan-outs")
    parser.add_argument("--eval-fanouts", type=_fanouts, default=[20, 20], help="fan-outs when scoring")
    parser.add_argument("--sampled-batch", type=int, default=1024, help="seed nodes per sampled mini-batch")
    parser.add_argument("--sampled-lr", type=float, default=0.01)
    parser.add_argument("--hidden", type=int, default=64, help="sampled GraphSAGE width")
    parser.add_argument("--full-batch", action="store_true", help="--time-to-acc: also full-batch GCN")
    parser.add_argument("--score-nodes", type=int, default=10_000,
                        help="--time-to-acc: score on this fixed seeded subset of the test nodes (0 = all)")
    parser.add_argument("--score-split", choices=("test", "val"), default="test",
                        help="--time-to-acc: race on test accuracy (default) or on validation accuracy (choose settings)")
    parser.add_argument("--evals-per-epoch", type=int, default=4,
                        help="--time-to-acc: score this many times per epoch (a one-step epoch once)")
    parser.add_argument("--no-early-stop", action="store_true",
                        help="--time-to-acc: run every method all --max-epochs (same times; only slower)")
    args = parser.parse_args(argv)
    if args.model.lower() not in sgl.models.MODELS:
        parser.error(f"unknown --model {args.model!r}; available: {', '.join(sorted(sgl.models.MODELS))}")
    torch.set_num_threads(args.threads)

    start = time.perf_counter()
    # feature_signal 0.08: features alone are weak, so propagation over the graph matters
    train_per_class = max(1, int(args.nodes * args.train_frac) // args.classes)
    graph = sgl.datasets.load("synthetic", num_nodes=args.nodes, avg_degree=args.avg_degree,
                              num_features=args.features, num_classes=args.classes, homophily=0.8,
                              feature_signal=0.08, train_per_class=train_per_class,
                              num_val=min(10_000, args.nodes // 10), num_test=min(50_000, args.nodes // 4), seed=0)
    graph_s = time.perf_counter() - start
    print(f"graph: {graph.num_nodes:,} nodes, {graph.num_edges:,} edges, {graph.num_features} features, "
          f"{graph.num_classes} classes, {int(graph.train_mask.sum()):,} train / {int(graph.test_mask.sum()):,} "
          f"test nodes; built in {graph_s:.1f}s; torch threads={torch.get_num_threads()}")

    sgap_overrides = {} if args.batch_size is None else {"batch_size": args.batch_size}
    options = {}
    for item in args.model_option:
        key, _, value = item.partition("=")
        options[key] = json.loads(value) if value[:1] in "0123456789-[{tf" else value
    if args.time_to_acc:
        def save(rows: List[Dict[str, Any]]) -> None:
            if args.json:
                with open(args.json, "w") as handle:
                    json.dump({"args": vars(args), "graph_s": graph_s, "rows": rows}, handle, indent=2)

        return race(graph, args, _sgap_builder(args.model, graph, options), save)
    plan = [(f"sgl:{args.model}", _sgap_builder(args.model, graph, options), sgap_overrides),
            ("gcn", lambda: GCN(graph.num_features, graph.num_classes,
                                GCNConfig(normalize_features=False)), {})]
    if not args.skip_gat:
        plan.append(("gat", lambda: GAT(graph.num_features, graph.num_classes,
                                        GATConfig(normalize_features=False)), {}))
    if args.pyg:
        plan.append(("pyg:GCNConv", lambda: _RawPyG("gcn", graph.num_features, graph.num_classes),
                     {"lr": 0.01, "weight_decay": 5e-4}))
        if not args.skip_gat:
            plan.append(("pyg:GATConv", lambda: _RawPyG("gat", graph.num_features, graph.num_classes),
                         {"lr": 0.005, "weight_decay": 5e-4}))

    rows = []
    for label, build, overrides in plan:
        rows.append(measure(label, build, graph, args.epochs, overrides))
        row = rows[-1]
        print(f"  done {label}: epoch {row['epoch_s']:.3f}s", flush=True)

    print(f"\n{'model':<14}{'params':>10}{'batch':>8}{'lr':>8}{'precompute s':>14}{'epoch s':>10}"
          f"{'total s':>10}{'test acc':>10}   (after {args.epochs} epochs)")
    for row in rows:
        batch = "full" if row["batch_size"] is None else str(row["batch_size"])
        print(f"{row['model']:<14}{row['params']:>10,}{batch:>8}{row['lr']:>8.3g}{row['precompute_s']:>14.3f}"
              f"{row['epoch_s']:>10.4f}{row['total_s']:>10.2f}{row['test_acc']:>10.4f}")
    sgap = rows[0]
    print()
    for row in rows[1:]:
        print(f"{row['model']} epoch / {sgap['model']} epoch = {row['epoch_s'] / sgap['epoch_s']:.1f}x; "
              f"{row['model']} time to {args.epochs} epochs / {sgap['model']} (incl. precompute) = "
              f"{row['total_s'] / sgap['total_s']:.1f}x")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"args": vars(args), "rows": rows}, handle, indent=2)
    return rows


if __name__ == "__main__":
    main()
