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
with ``--eval-fanouts``), and with ``--full-batch`` also full-batch GCN: every method trains
up to ``--max-epochs`` epochs, its test accuracy is scored after each (not timed), and the
clock (precompute + training) stops at the first epoch that reaches the target accuracy
(``--target-acc``, default the lowest best accuracy any method reached, so all reach it)::

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


class _SampledGAT(torch.nn.Module):
    """Mini-batch GAT over sampled blocks (GATConv on the bipartite source/destination sets)."""

    full_batch = False

    def __init__(self, in_features: int, num_classes: int, hidden: int = 8, heads: int = 8,
                 num_layers: int = 2, dropout: float = 0.5) -> None:
        super().__init__()
        from torch_geometric.nn import GATConv

        sizes = [in_features] + [hidden * heads] * (num_layers - 1)
        self.convs = torch.nn.ModuleList([GATConv(a, hidden, heads=heads, add_self_loops=False) for a in sizes])
        self.convs[-1] = GATConv(sizes[-1], num_classes, heads=1, concat=False, add_self_loops=False)
        self.dropout = dropout

    def reset_parameters(self) -> None:
        for conv in self.convs:
            conv.reset_parameters()

    def forward(self, x: torch.Tensor, blocks: List[Any]) -> torch.Tensor:
        for i, (conv, block) in enumerate(zip(self.convs, blocks)):
            x = F.dropout(x, p=self.dropout, training=self.training)
            x = conv((x, x[:block.num_dst]), block.edge_index, size=block.size)
            if i < len(self.convs) - 1:
                x = F.elu(x)
        return x


def _sampled_race(label: str, model: torch.nn.Module, graph: Any, args) -> Dict[str, Any]:
    """Train a block model through our neighbour sampler; (elapsed s, test acc) after every epoch."""
    from sgl.samplers import NeighborSampler, NodeLoader

    seed_everything(0)
    train = graph.train_mask.nonzero().flatten()
    test = graph.test_mask.nonzero().flatten()
    start = time.perf_counter()
    x = graph.x.float()  # CSBM features are Gaussian: no row normalisation (as for the SGAP model)
    sampler = NeighborSampler(graph, args.fanouts)
    loader = NodeLoader(sampler, train, batch_size=args.sampled_batch, shuffle=True, seed=0)
    eval_sampler = NeighborSampler(graph, args.eval_fanouts)
    precompute_s = time.perf_counter() - start
    optimizer = torch.optim.Adam(model.parameters(), lr=args.sampled_lr, weight_decay=5e-4)

    def epoch() -> None:
        model.train()
        for mb in loader:
            optimizer.zero_grad()
            out = model(x[mb.n_id], mb.blocks)
            F.cross_entropy(out, graph.y[mb.output_nodes]).backward()
            optimizer.step()

    @torch.no_grad()
    def score() -> float:
        model.eval()
        logits = []
        for i in range(0, test.numel(), 4096):
            mb = eval_sampler.sample(test[i:i + 4096], seed=0)
            logits.append(model(x[mb.n_id], mb.blocks))
        return accuracy(torch.cat(logits), graph.y[test])

    return _race_loop(label, epoch, score, precompute_s, args)


def _sgap_race(label: str, build: Callable[[], torch.nn.Module], graph: Any, args) -> Dict[str, Any]:
    seed_everything(0)
    model = build()
    preset = {k: v for k, v in getattr(model, "default_train_config", {}).items()
              if k in ("lr", "weight_decay", "batch_size")}
    if args.batch_size is not None and not getattr(model, "full_batch", False):
        preset["batch_size"] = args.batch_size
    train_config = TrainConfig(**preset, epochs=args.max_epochs, progress=False)
    start = time.perf_counter()
    features = model.precompute(graph)
    precompute_s = time.perf_counter() - start
    if isinstance(features, torch.Tensor):
        features = NodeFeatures(features)
    epoch = _epoch_fn(model, features, graph, train_config, 0)
    trainer, test = Trainer(train_config), graph.test_mask.nonzero().flatten()

    def score() -> float:
        if getattr(model, "full_batch", False):
            logits = trainer.predict_all(model, features, graph, torch.device("cpu"))[test]
        else:
            with torch.no_grad():
                model.eval()
                logits = torch.cat([model(to_device(features[test[i:i + 8192]], torch.device("cpu")))
                                    for i in range(0, test.numel(), 8192)])
        return accuracy(logits, graph.y[test])

    return _race_loop(label, epoch, score, precompute_s, args)


def _race_loop(label: str, epoch: Callable[[], None], score: Callable[[], float], precompute_s: float,
               args) -> Dict[str, Any]:
    elapsed, curve, epoch_times = precompute_s, [], []
    for _ in range(args.max_epochs):
        start = time.perf_counter()
        epoch()
        epoch_times.append(time.perf_counter() - start)
        elapsed += epoch_times[-1]
        curve.append((elapsed, score()))  # scoring is not timed
    print(f"  done {label}: precompute {precompute_s:.2f}s, epoch {statistics.median(epoch_times):.3f}s, "
          f"best test acc {max(a for _, a in curve):.4f}", flush=True)
    return {"model": label, "precompute_s": precompute_s, "epoch_s": statistics.median(epoch_times),
            "curve": curve, "best_acc": max(a for _, a in curve)}


def race(graph: Any, args, sgap_build: Callable[[], torch.nn.Module]) -> List[Dict[str, Any]]:
    """Time to a fixed test accuracy: the SGL model vs sampled GraphSAGE/GAT (and full-batch GCN)."""
    from sgl.samplers import SampledGNN

    rows = [_sgap_race(f"sgl:{args.model}", sgap_build, graph, args),
            _sampled_race("sampled-sage", SampledGNN(graph.num_features, graph.num_classes, hidden=args.hidden,
                                                     num_layers=len(args.fanouts), normalize_features=False),
                          graph, args)]
    if not args.skip_gat:
        rows.append(_sampled_race("sampled-gat", _SampledGAT(graph.num_features, graph.num_classes,
                                                             num_layers=len(args.fanouts)), graph, args))
    if args.full_batch:
        rows.append(_sgap_race("full-gcn", lambda: GCN(graph.num_features, graph.num_classes,
                                                       GCNConfig(normalize_features=False)), graph, args))
    target = args.target_acc if args.target_acc is not None else min(r["best_acc"] for r in rows)
    print(f"\ntarget test accuracy {target:.4f} ({'given' if args.target_acc is not None else 'lowest best'}); "
          f"fan-outs {args.fanouts}, eval fan-outs {args.eval_fanouts}, up to {args.max_epochs} epochs")
    print(f"{'model':<16}{'precompute s':>14}{'epoch s':>10}{'best acc':>10}{'epochs':>8}{'time to target s':>18}")
    for row in rows:
        hit = [(i + 1, t) for i, (t, a) in enumerate(row["curve"]) if a >= target]
        row["epochs_to_target"], row["time_to_target_s"] = hit[0] if hit else (None, None)
        when = "not reached" if not hit else f"{hit[0][1]:.2f}"
        print(f"{row['model']:<16}{row['precompute_s']:>14.2f}{row['epoch_s']:>10.3f}{row['best_acc']:>10.4f}"
              f"{str(row['epochs_to_target'] or '-'):>8}{when:>18}")
    ours = rows[0]["time_to_target_s"]
    reached = [r for r in rows[1:] if r["time_to_target_s"] is not None]
    if ours is None or not reached:
        print("no ratio: the SGL model or every baseline missed the target")
    else:
        fastest = min(reached, key=lambda r: r["time_to_target_s"])
        print(f"fastest baseline to the target: {fastest['model']}; its time / sgl:{args.model}'s = "
              f"{fastest['time_to_target_s'] / ours:.1f}x (timings under load: rerun on a quiet machine)")
    return rows


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
                        help="mini-batch size of the SGL model (default: its preset, else all training nodes)")
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
    print(f"graph: {graph.num_nodes:,} nodes, {graph.num_edges:,} edges, {graph.num_features} features, "
          f"{graph.num_classes} classes, {int(graph.train_mask.sum()):,} train / {int(graph.test_mask.sum()):,} "
          f"test nodes; built in {time.perf_counter() - start:.1f}s; torch threads={torch.get_num_threads()}")

    sgap_overrides = {} if args.batch_size is None else {"batch_size": args.batch_size}
    options = {}
    for item in args.model_option:
        key, _, value = item.partition("=")
        options[key] = json.loads(value) if value[:1] in "0123456789-[{tf" else value
    if args.time_to_acc:
        rows = race(graph, args, _sgap_builder(args.model, graph, options))
        if args.json:
            with open(args.json, "w") as handle:
                json.dump({"args": vars(args), "rows": rows}, handle, indent=2)
        return rows
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
