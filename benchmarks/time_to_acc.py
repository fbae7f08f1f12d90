"""Time to a fixed test accuracy (issue 27, item 3): an SGL scalable model vs mini-batch GNNs.

Used by ``bench_models.py --time-to-acc``. The race between the SGL model (say GAMLP) and the
baselines that fit at a million nodes — GraphSAGE and GAT trained through SGL's
:class:`~sgl.samplers.NeighborSampler` with the same fan-outs, optionally full-batch GCN —
follows these rules, so that the ratio means what it says:

* **one graph, one split, one thread count** for every method (the CSBM graph of
  ``bench_models.py``: 80 % of edges inside a class, weak features, so neighbours matter);
* **the clock** runs during precompute (the SGL model's propagation; the baselines' sampler
  construction) and training (sampling, feature gathering, forward, backward, step) and is
  stopped while scoring, for every method alike;
* **scoring**: test accuracy after every ``1 / evals_per_epoch`` of an epoch (a one-step,
  full-batch epoch is one segment), on one fixed seeded subset of the test nodes
  (``score_nodes``, the same nodes for every method); the sampled baselines predict on
  sampled computation graphs (``eval_fanouts``, a fixed seed);
* **steps**: every mini-batch method steps over ``sampled_batch`` training nodes at a time
  (1024; for the SGL model unless ``batch_size`` is given — GAMLP's preset is one full-batch
  step per epoch, which needs ~8x the time to the same *validation* accuracy at 100k nodes);
* **the target**: ``target_acc``, or by default the lowest best accuracy any method reached,
  so every method reaches it; a method's time to target is the clock at its first score at
  or above it;
* **early stop (exact)**: the SGL model runs all ``max_epochs`` first; each later method
  stops at its first score at or above the *stop level* (``target_acc`` when given, else the
  SGL model's best). This changes no reported time: the target is ``min`` over methods of
  their best accuracy, and a stopped method's best is ``>=`` the stop level ``>=`` the
  target, so the minimum, and the first score reaching it, are the same as without
  stopping. Only the stopped method's own "best" is then a lower bound (marked ``>=``).
"""
from __future__ import annotations

import itertools
import statistics
import time
from typing import Any, Callable, Dict, Iterator, List, Optional

import torch
import torch.nn.functional as F

from sgl.models.features import NodeFeatures, to_device
from sgl.tasks import TrainConfig, Trainer, accuracy, seed_everything

#: a method's training as epochs cut into segments: ``segments()`` runs one epoch and yields
#: the fraction of it done after each segment (the race scores after every yield)
Segments = Callable[[], Iterator[float]]


def _peak_rss_mb() -> float:
    try:
        from procmem import status_kb
    except ImportError:  # run from elsewhere than benchmarks/
        return float("nan")
    return status_kb("VmHWM") / 1024


def _reset_peak() -> None:
    try:
        from procmem import reset_peak
    except ImportError:
        return
    reset_peak()


def warm_up(args: Any) -> None:
    """Untimed: load the propagation kernel (numba's cache) and torch_geometric's layers once,
    so no method's clock pays a one-time compile or import."""
    import sgl
    from sgl.ops import propagate_hops
    from sgl.samplers import NeighborSampler, SampledGNN

    tiny = sgl.datasets.load("synthetic", num_nodes=200, num_features=8, seed=0)
    propagate_hops(tiny, tiny.x, 2)
    batch = NeighborSampler(tiny, args.fanouts).sample(torch.arange(8), seed=0)
    for model in (SampledGNN(8, tiny.num_classes, hidden=8, num_layers=len(args.fanouts), normalize_features=False),
                  SampledGAT(8, tiny.num_classes, num_layers=len(args.fanouts))):
        model(tiny.x[batch.n_id], batch.blocks).sum().backward()


def score_subset(graph: Any, count: Optional[int], seed: int = 0, split: str = "test") -> torch.Tensor:
    """A fixed seeded subset of ``count`` nodes of ``split`` (all of them when ``count`` is None/0 or larger).

    ``split="val"`` scores validation nodes instead: for choosing settings without the test split.

    >>> import sgl
    >>> g = sgl.datasets.load("synthetic", num_nodes=400, num_test=100, seed=0)
    >>> score_subset(g, 30).numel(), bool(g.test_mask[score_subset(g, 30)].all()), score_subset(g, None).numel()
    (30, True, 100)
    """
    test = getattr(graph, f"{split}_mask").nonzero().flatten()
    if not count or count >= test.numel():
        return test
    order = torch.randperm(test.numel(), generator=torch.Generator().manual_seed(seed))
    return test[order[:count]].sort().values


class SampledGAT(torch.nn.Module):
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


def _cut(steps: int, parts: int) -> int:
    """Steps per segment when an epoch of ``steps`` is scored ``parts`` times."""
    return max(1, -(-steps // max(1, parts)))


def sampled_race(label: str, model: torch.nn.Module, graph: Any, args: Any,
                 stop_at: Optional[float] = None) -> Dict[str, Any]:
    """Train a block model through our neighbour sampler, scoring it as the module docstring says."""
    from sgl.samplers import NeighborSampler, NodeLoader

    seed_everything(0)
    train = graph.train_mask.nonzero().flatten()
    test = score_subset(graph, args.score_nodes, split=args.score_split)
    start = time.perf_counter()
    x = graph.x.float()  # CSBM features are Gaussian: no row normalisation (as for the SGAP model)
    sampler = NeighborSampler(graph, args.fanouts)
    loader = NodeLoader(sampler, train, batch_size=args.sampled_batch, shuffle=True, seed=0)
    eval_sampler = NeighborSampler(graph, args.eval_fanouts)
    precompute_s = time.perf_counter() - start
    optimizer = torch.optim.Adam(model.parameters(), lr=args.sampled_lr, weight_decay=5e-4)
    total = len(loader)
    per = _cut(total, args.evals_per_epoch)

    def segments() -> Iterator[float]:
        batches, done = iter(loader), 0
        while done < total:
            model.train()
            for mb in itertools.islice(batches, per):
                optimizer.zero_grad()
                out = model(x[mb.n_id], mb.blocks)
                F.cross_entropy(out, graph.y[mb.output_nodes]).backward()
                optimizer.step()
                done += 1
            yield done / total

    @torch.no_grad()
    def score() -> float:
        model.eval()
        logits = []
        for i in range(0, test.numel(), 4096):
            mb = eval_sampler.sample(test[i:i + 4096], seed=0)
            logits.append(model(x[mb.n_id], mb.blocks))
        return accuracy(torch.cat(logits), graph.y[test])

    return race_loop(label, segments, score, precompute_s, args, stop_at)


def sgap_race(label: str, build: Callable[[], torch.nn.Module], graph: Any, args: Any,
              stop_at: Optional[float] = None) -> Dict[str, Any]:
    """Precompute, then train as :class:`sgl.tasks.Trainer` does (mini-batches of the training rows)."""
    seed_everything(0)
    model = build()
    preset = {k: v for k, v in getattr(model, "default_train_config", {}).items()
              if k in ("lr", "weight_decay", "batch_size")}
    full_batch = bool(getattr(model, "full_batch", False))
    if not full_batch:  # steps of the same number of training nodes as the sampled baselines take
        preset["batch_size"] = args.batch_size if args.batch_size is not None else args.sampled_batch
    train_config = TrainConfig(**preset, epochs=args.max_epochs, progress=False)
    start = time.perf_counter()
    features = model.precompute(graph)
    precompute_s = time.perf_counter() - start
    if isinstance(features, torch.Tensor):
        features = NodeFeatures(features)
    optimizer = torch.optim.Adam(model.parameters(), lr=train_config.lr, weight_decay=train_config.weight_decay)
    train, y, cpu = graph.train_mask.nonzero().flatten(), graph.y, torch.device("cpu")
    generator = torch.Generator().manual_seed(0)
    batch = train_config.batch_size or train.numel()
    trainer, test = Trainer(train_config), score_subset(graph, args.score_nodes, split=args.score_split)

    def segments() -> Iterator[float]:
        model.train()
        if full_batch:  # one forward over the whole graph: a one-step epoch
            optimizer.zero_grad()
            F.cross_entropy(model(features)[train], y[train]).backward()
            optimizer.step()
            yield 1.0
            return
        order = train[torch.randperm(train.numel(), generator=generator)]
        starts = list(range(0, order.numel(), batch))
        per = _cut(len(starts), args.evals_per_epoch)
        for part in range(0, len(starts), per):
            model.train()
            for i in starts[part:part + per]:
                idx = order[i:i + batch]
                optimizer.zero_grad()
                F.cross_entropy(model(to_device(features[idx], cpu)), y[idx]).backward()
                optimizer.step()
            yield min(len(starts), part + per) / len(starts)

    def score() -> float:
        if full_batch:
            logits = trainer.predict_all(model, features, graph, cpu)[test]
        else:
            with torch.no_grad():
                model.eval()
                logits = torch.cat([model(to_device(features[test[i:i + 8192]], cpu))
                                    for i in range(0, test.numel(), 8192)])
        return accuracy(logits, y[test])

    row = race_loop(label, segments, score, precompute_s, args, stop_at)
    row["batch_size"] = None if full_batch else batch
    return row


def race_loop(label: str, segments: Segments, score: Callable[[], float], precompute_s: float, args: Any,
              stop_at: Optional[float] = None) -> Dict[str, Any]:
    """Up to ``args.max_epochs`` epochs; score after each segment (untimed); stop at ``stop_at``."""
    elapsed, train_s, curve, epoch_times = precompute_s, 0.0, [], []
    stopped, done = False, 0.0
    for epoch in range(args.max_epochs):
        epoch_s, score_s, steps = 0.0, 0.0, segments()
        while not stopped:
            start = time.perf_counter()
            fraction = next(steps, None)
            spent = time.perf_counter() - start
            epoch_s, elapsed, train_s = epoch_s + spent, elapsed + spent, train_s + spent
            if fraction is None:
                break
            start = time.perf_counter()
            acc = score()  # not timed
            score_s += time.perf_counter() - start
            done = epoch + fraction
            curve.append((elapsed, acc, done))
            stopped = stop_at is not None and acc >= stop_at
        if not stopped:
            epoch_times.append(epoch_s)
        print(f"    {label} epoch {done:.2f}: train {epoch_s:.2f}s, clock {elapsed:.1f}s, {args.score_split} acc {curve[-1][1]:.4f}"
              f"{' (stop level reached)' if stopped else ''}; scoring {score_s:.1f}s (not timed)", flush=True)
        if stopped:
            break
    best = max(a for _, a, _ in curve)
    print(f"  done {label}: precompute {precompute_s:.2f}s, {done:.2f} epochs, best {args.score_split} acc "
          f"{'>=' if stopped else ''}{best:.4f}", flush=True)
    return {"model": label, "precompute_s": precompute_s,
            "epoch_s": statistics.median(epoch_times) if epoch_times else train_s / done,
            "epochs_run": done, "train_s": train_s, "curve": curve, "best_acc": best, "stopped_early": stopped,
            "peak_rss_mb": _peak_rss_mb()}


def race(graph: Any, args: Any, sgap_build: Callable[[], torch.nn.Module],
         save: Optional[Callable[[List[Dict[str, Any]]], None]] = None) -> List[Dict[str, Any]]:
    """Time to a fixed test accuracy: the SGL model vs sampled GraphSAGE/GAT (and full-batch GCN).

    ``save(rows)`` (optional) is called after every method, so partial results survive.
    """
    from sgl.models.message_passing import GCN, GCNConfig
    from sgl.samplers import SampledGNN

    warm_up(args)
    rows: List[Dict[str, Any]] = []

    def finish(row: Dict[str, Any]) -> None:
        rows.append(row)
        if save is not None:
            save(rows)
        _reset_peak()

    _reset_peak()
    finish(sgap_race(f"sgl:{args.model}", sgap_build, graph, args, args.target_acc))
    stop_at = None if args.no_early_stop else (args.target_acc if args.target_acc is not None
                                                else rows[0]["best_acc"])
    if stop_at is not None:
        print(f"  baselines stop at {args.score_split} acc >= {stop_at:.4f} "
              f"({'the target' if args.target_acc is not None else 'the SGL model best'})", flush=True)
    finish(sampled_race("sampled-sage", SampledGNN(graph.num_features, graph.num_classes, hidden=args.hidden,
                                                   num_layers=len(args.fanouts), normalize_features=False),
                        graph, args, stop_at))
    if not args.skip_gat:
        finish(sampled_race("sampled-gat", SampledGAT(graph.num_features, graph.num_classes,
                                                      num_layers=len(args.fanouts)), graph, args, stop_at))
    if args.full_batch:
        finish(sgap_race("full-gcn", lambda: GCN(graph.num_features, graph.num_classes,
                                                 GCNConfig(normalize_features=False)), graph, args, stop_at))
    target = args.target_acc if args.target_acc is not None else min(r["best_acc"] for r in rows)
    scored = score_subset(graph, args.score_nodes, split=args.score_split).numel()
    print(f"\ntarget {args.score_split} accuracy {target:.4f} ({'given' if args.target_acc is not None else 'lowest best'}) "
          f"on {scored:,} {args.score_split} nodes; fan-outs {args.fanouts}, eval fan-outs "
          f"{args.eval_fanouts}, up to {args.max_epochs} epochs, scored {args.evals_per_epoch}x per epoch")
    print(f"{'model':<16}{'precompute s':>14}{'epoch s':>10}{'best acc':>10}{'epochs':>8}{'time to target s':>18}"
          f"{'peak RSS MB':>13}")
    for row in rows:
        hit = [(e, t) for t, a, e in row["curve"] if a >= target]
        row["epochs_to_target"], row["time_to_target_s"] = hit[0] if hit else (None, None)
        when = "not reached" if not hit else f"{hit[0][1]:.2f}"
        best = f"{'>=' if row['stopped_early'] else ''}{row['best_acc']:.4f}"
        epochs = "-" if not hit else f"{hit[0][0]:.2f}"
        print(f"{row['model']:<16}{row['precompute_s']:>14.2f}{row['epoch_s']:>10.3f}{best:>10}"
              f"{epochs:>8}{when:>18}{row['peak_rss_mb']:>13.0f}")
    ours = rows[0]["time_to_target_s"]
    reached = [r for r in rows[1:] if r["time_to_target_s"] is not None]
    if ours is None or not reached:
        print("no ratio: the SGL model or every baseline missed the target")
    else:
        fastest = min(reached, key=lambda r: r["time_to_target_s"])
        print(f"fastest baseline to the target: {fastest['model']}; its time / sgl:{args.model}'s = "
              f"{fastest['time_to_target_s'] / ours:.1f}x (target >= 10x)")
        # No training schedule can put the SGL model at the target before its precompute ends, so
        # the fastest baseline's time over that precompute bounds the ratio from above.
        ceiling = fastest["time_to_target_s"] / rows[0]["precompute_s"]
        rows[0]["ratio_ceiling"] = ceiling
        print(f"ceiling: {fastest['model']}'s time to target / sgl:{args.model}'s precompute alone = {ceiling:.1f}x "
              f"(no training of the SGL model beats it; a higher ratio needs a cheaper precompute)")
    for row in rows[1:]:
        print(f"epoch time {row['model']} / sgl:{args.model} = {row['epoch_s'] / rows[0]['epoch_s']:.1f}x"
              f"{'' if row['epochs_run'] >= 1 else ' (less than one epoch run: extrapolated from its segments)'}")
    if save is not None:
        save(rows)
    return rows
