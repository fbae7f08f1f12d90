r"""Supervised link prediction: a zoo model as encoder, a decoder on node pairs, trained end to end.

The encoder is any zoo model built with its output width = the embedding size: a
message-passing model (GCN, GraphSAGE, GAT: a full-graph forward per step) or a scalable
SGAP model (SGC, SIGN, GAMLP, ...: its ``precompute`` runs once, then mini-batches of
precomputed rows of the pairs' endpoints). Either way its inputs come from the *training*
graph only, so no held-out edge reaches message passing or propagated features. A decoder
from :mod:`sgl.models.link_decoders` scores a pair (``dot`` or ``mlp`` on the Hadamard product).

Training follows PyG's ``link_pred`` example: every epoch draws fresh negatives
(``neg_ratio`` per training edge, uniformly among pairs that are not *training* edges, so the
held-out edges stay unseen), and minimises binary cross-entropy on the logits of positives
and negatives, in steps of ``batch_size`` positive edges (all at once by default). The epoch
kept is the best on the validation set by the split's metric (AUC for a random split, OGB's
Hits@K or MRR for an OGB split), with ``patience``; the seed fixes the initialisation,
dropout and every negative draw. Val/test report AUC, AP, Hits@K (each K of ``hits_k``) and
MRR (:mod:`sgl.tasks.ranking_metrics`).

Example:
    >>> import sgl
    >>> from sgl.models import GCN, InnerProductDecoder
    >>> from sgl.tasks import TrainConfig, split_edges
    >>> from sgl.tasks.link_supervised import fit_link_predictor
    >>> graph = sgl.datasets.csbm(num_nodes=120, num_classes=2, avg_degree=6, num_features=8, seed=0)
    >>> split = split_edges(graph, 0.1, 0.2, seed=0, rounding="floor")
    >>> result = fit_link_predictor(GCN(8, 16), InnerProductDecoder(16), split,
    ...                             TrainConfig(lr=0.01, epochs=5, progress=False), hits_k=[10])
    >>> sorted(k for k in result if k.startswith("test_"))
    ['test_ap', 'test_auc', 'test_hits@10', 'test_mrr']
"""
from __future__ import annotations

import copy
import itertools
import math
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

from sgl._checks import check_int, check_real
from sgl.data import EdgeSplit, Graph
from sgl.device import get_device
from sgl.errors import ConfigError, GraphError
from sgl.models.base import ScalableModel
from sgl.models.features import to_device
from sgl.tasks.config import TrainConfig
from sgl.tasks.link_prediction import sample_negatives, split_edges
from sgl.tasks.ranking_metrics import check_metric_name, link_eval, link_metric
from sgl.tasks.stats import seed_everything, summarize

__all__ = ["LINK_OPTIONS", "LINK_TRAIN_DEFAULTS", "check_link_options", "check_link_model", "fit_link_predictor",
           "run_supervised_link_prediction"]

#: task options of supervised link prediction (defaults). ``val_ratio``/``test_ratio`` None:
#: the dataset's own split (OGB) when it has one, else 0.05 / 0.1 held out at random.
LINK_OPTIONS: Dict[str, Any] = {"val_ratio": None, "test_ratio": None, "neg_ratio": 1.0, "decoder": "dot",
                                "decoder_layers": None, "hits_k": [20, 50, 100], "embed_dim": 64}
#: training defaults (fields of TrainConfig): PyG's link_pred example optimiser, with early stopping
LINK_TRAIN_DEFAULTS: Dict[str, Any] = {"lr": 0.01, "weight_decay": 0.0, "epochs": 500, "patience": 50}
_DEFAULT_RATIOS = (0.05, 0.1)


def check_link_options(options: Mapping[str, Any]) -> Dict[str, Any]:
    """``options`` over :data:`LINK_OPTIONS`, each checked; raises :class:`ConfigError` naming the fix.

    Example:
        >>> check_link_options({"decoder": "mlp", "hits_k": 50})["hits_k"]
        [50]
        >>> check_link_options({"neg_ratio": 0})
        Traceback (most recent call last):
        ...
        sgl.errors.ConfigError: neg_ratio must be a number > 0.0, got 0
    """
    from sgl.models.link_decoders import LINK_DECODERS

    unknown = set(options) - set(LINK_OPTIONS)
    if unknown:
        raise ConfigError(f"unknown link option(s) {sorted(unknown)}; valid: {sorted(LINK_OPTIONS)}")
    opts = {**LINK_OPTIONS, **options}
    for name in ("val_ratio", "test_ratio"):
        if opts[name] is not None:
            opts[name] = check_real(opts[name], name, 0.0, 1.0, open_low=name == "test_ratio", open_high=True)
    val, test = (_DEFAULT_RATIOS[0] if opts["val_ratio"] is None else opts["val_ratio"],
                 _DEFAULT_RATIOS[1] if opts["test_ratio"] is None else opts["test_ratio"])
    if val == 0:
        raise ConfigError("val_ratio must be > 0: supervised link prediction picks its epoch on validation edges")
    if val + test >= 1.0:
        raise ConfigError(f"val_ratio + test_ratio must be < 1 to leave training edges, got {val} + {test}")
    opts["neg_ratio"] = check_real(opts["neg_ratio"], "neg_ratio", 0.0, open_low=True)
    if opts["neg_ratio"] == math.inf:
        raise ConfigError("neg_ratio (negatives per positive edge) must be finite, got inf")
    if opts["decoder"] not in LINK_DECODERS:
        raise ConfigError(f"unknown link decoder {opts['decoder']!r}; choose one of {', '.join(LINK_DECODERS)}")
    if opts["decoder_layers"] is not None:
        if opts["decoder"] != "mlp":
            raise ConfigError("decoder_layers sets the depth of the mlp decoder; the dot decoder has no layers")
        opts["decoder_layers"] = check_int(opts["decoder_layers"], "decoder_layers", minimum=1)
    hits = opts["hits_k"]
    hits = [hits] if isinstance(hits, int) and not isinstance(hits, bool) else hits
    if not isinstance(hits, (list, tuple)) or not hits:
        raise ConfigError(f"hits_k must list the K of Hits@K, e.g. [20, 50, 100]; got {opts['hits_k']!r}")
    opts["hits_k"] = sorted({check_int(k, "every K in hits_k", minimum=1) for k in hits})
    opts["embed_dim"] = check_int(opts["embed_dim"], "embed_dim", minimum=2)
    return opts


def check_link_model(name: str) -> None:
    """Raise unless ``name`` is a zoo model that can encode nodes for link prediction."""
    from sgl.models import MODELS
    from sgl.models.ssl import SSL_MODELS

    if str(name).lower().replace("_", "-") not in MODELS:
        raise ConfigError(f"unknown model {name!r} for --task link; supervised encoders: {', '.join(sorted(MODELS))}; "
                          f"self-supervised: {', '.join(sorted(SSL_MODELS))}")


def _check_encoder(encoder: Any) -> None:
    if not isinstance(encoder, ScalableModel):
        raise ConfigError(f"{type(encoder).__name__} is not a zoo model (sgl.models.ScalableModel); the link "
                          f"encoder needs precompute(graph), forward(batch) and full_batch")
    config = getattr(encoder, "config", None)
    if getattr(config, "label_hops", 0):
        raise ConfigError("label_hops > 0 feeds node labels to GAMLP; link prediction has none: set label_hops=0")
    if getattr(config, "post_steps", 0):
        raise ConfigError("post_steps > 0 smooths class probabilities after training; a link encoder outputs "
                          "embeddings: set post_steps=0")


def _embed(encoder: Any, inputs: Any, pairs: torch.Tensor, device: torch.device,
           chunk: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """Embeddings covering the pairs' endpoints, and the ``[2, k]`` pairs as rows of them."""
    if encoder.full_batch:
        return encoder(inputs), pairs.to(device)
    nodes, inverse = torch.unique(pairs, return_inverse=True)
    step = chunk or nodes.numel()
    rows = [encoder(to_device(inputs[nodes[i:i + step]], device)) for i in range(0, nodes.numel(), step)]
    return torch.cat(rows), inverse.to(device)


@torch.no_grad()
def _score_sets(encoder: Any, decoder: Any, inputs: Any, sets: Sequence[torch.Tensor], device: torch.device,
                chunk: int) -> List[torch.Tensor]:
    """Decoder logits of every pair of every ``[2, k]`` set (one encoder pass for all of them)."""
    encoder.eval()
    decoder.eval()
    h, index = _embed(encoder, inputs, torch.cat(list(sets), dim=1), device, chunk)
    scores = torch.cat([decoder(h[index[0, i:i + chunk]], h[index[1, i:i + chunk]])
                        for i in range(0, index.size(1), chunk)])
    return list(scores.split([s.size(1) for s in sets]))


def _train_epoch(encoder: Any, decoder: Any, inputs: Any, positives: torch.Tensor, negatives: torch.Tensor,
                 optimizer: torch.optim.Optimizer, batch: int, generator: torch.Generator,
                 device: torch.device) -> float:
    encoder.train()
    decoder.train()
    positives = positives[:, torch.randperm(positives.size(1), generator=generator)]
    steps = -(-positives.size(1) // batch)
    per_pos, per_neg = -(-positives.size(1) // steps), -(-negatives.size(1) // steps)
    total = 0.0
    for step in range(steps):
        pos = positives[:, step * per_pos:(step + 1) * per_pos]
        neg = negatives[:, step * per_neg:(step + 1) * per_neg]
        optimizer.zero_grad()
        h, index = _embed(encoder, inputs, torch.cat([pos, neg], dim=1), device)
        logits = decoder(h[index[0]], h[index[1]])
        target = torch.cat([torch.ones(pos.size(1), device=device), torch.zeros(neg.size(1), device=device)])
        loss = F.binary_cross_entropy_with_logits(logits, target)
        loss.backward()
        optimizer.step()
        total += float(loss.detach())
    return total / steps


def fit_link_predictor(encoder: Any, decoder: Any, split: EdgeSplit, config: Optional[TrainConfig] = None,
                       seed: int = 0, neg_ratio: float = 1.0, hits_k: Sequence[int] = (20, 50, 100)) -> Dict[str, Any]:
    """Train ``encoder`` + ``decoder`` on ``split`` (see the module docstring); return the chosen
    epoch's validation and test metrics and timings.

    ``config``: optimisation settings (default :data:`LINK_TRAIN_DEFAULTS`); ``batch_size``
    counts positive edges per step, ``device`` places both modules (default: auto).
    """
    config = config or TrainConfig(**LINK_TRAIN_DEFAULTS, progress=False)
    _check_encoder(encoder)
    if split.train_pos is None:
        raise GraphError("the split has no train_pos (the training edges once each); make it with "
                         "sgl.tasks.split_edges or load a dataset that carries one")
    if split.val_pos.size(1) == 0 or split.val_neg.size(1) == 0:
        raise ConfigError("the split has no validation edges; supervised link prediction picks its epoch on them")
    metric = check_metric_name(split.metric)
    hits_k = sorted(set(hits_k) | ({int(metric[5:])} if metric.startswith("hits@") else set()))
    graph, positives = split.train_graph, split.train_pos.long()
    n, m = graph.num_nodes, positives.size(1)
    num_neg = max(1, int(neg_ratio * m))
    if m == 0 or num_neg > n * (n - 1) // 2 - m:
        raise ConfigError(f"cannot draw {num_neg} negatives for {m} training edges among {n} nodes; lower neg_ratio")
    seed_everything(seed)
    for module in (encoder, decoder):
        if hasattr(module, "reset_parameters"):
            module.reset_parameters()
    device = get_device(config.device)
    encoder.to(device)
    decoder.to(device)
    start = time.perf_counter()
    inputs = encoder.precompute(graph)  # the training graph only: held-out edges never reach the features
    precompute_time = time.perf_counter() - start
    if encoder.full_batch:
        inputs = inputs.to(device)
    lo, hi = torch.minimum(positives[0], positives[1]), torch.maximum(positives[0], positives[1])
    forbidden = torch.unique(lo * n + hi)  # negatives avoid training edges only: held-out ones stay unseen
    parameters = list(itertools.chain(encoder.parameters(), decoder.parameters()))
    optimizer = torch.optim.Adam(parameters, lr=config.lr, weight_decay=config.weight_decay)
    generator = torch.Generator().manual_seed(seed)
    batch = config.batch_size or m
    best, best_epoch, best_state, stale, epochs_run = -math.inf, -1, None, 0, 0
    bar = None
    if config.progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=config.epochs, desc=f"link seed {seed}", leave=False, disable=None)
    start = time.perf_counter()
    for epoch in range(config.epochs):
        negatives = sample_negatives(n, num_neg, forbidden, generator)
        loss = _train_epoch(encoder, decoder, inputs, positives, negatives, optimizer, batch, generator, device)
        pos, neg = _score_sets(encoder, decoder, inputs, [split.val_pos, split.val_neg], device,
                               config.eval_batch_size)
        score = link_metric(metric, pos, neg, split.neg_per_pos)
        epochs_run = epoch + 1
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.4f}", **{f"val_{metric}": f"{score:.4f}"})
        if score > best:
            best, best_epoch, stale = score, epoch, 0
            best_state = [copy.deepcopy(module.state_dict()) for module in (encoder, decoder)]
        else:
            stale += 1
            if config.patience is not None and stale >= config.patience:
                break
    train_time = time.perf_counter() - start
    if bar is not None:
        bar.close()
    for module, state in zip((encoder, decoder), best_state or ()):  # None: no finite validation score
        module.load_state_dict(state)
    sets = [split.val_pos, split.val_neg, split.test_pos, split.test_neg]
    val_pos, val_neg, test_pos, test_neg = _score_sets(encoder, decoder, inputs, sets, device,
                                                       config.eval_batch_size)
    out: Dict[str, Any] = {"seed": seed, "best_epoch": best_epoch, "epochs_run": epochs_run,
                           "precompute_time_s": precompute_time, "train_time_s": train_time}
    for name, (p, q) in (("val", (val_pos, val_neg)), ("test", (test_pos, test_neg))):
        out.update({f"{name}_{k}": v for k, v in link_eval(p, q, hits_k, split.neg_per_pos).items()})
    return out


def run_supervised_link_prediction(encoder_factory: Callable[[], Any], graph: Graph, seeds: Sequence[int] = (0,),
                                   train_config: Optional[TrainConfig] = None, *,
                                   val_ratio: Optional[float] = None, test_ratio: Optional[float] = None,
                                   neg_ratio: float = 1.0, decoder: str = "dot", decoder_layers: Optional[int] = None,
                                   hits_k: Sequence[int] = (20, 50, 100)) -> Dict[str, Any]:
    """Per seed: the edge split (the graph's own ``graph.link_split`` if it has one, else a random
    PyG-style split of ``val_ratio``/``test_ratio``, default 0.05/0.1, seeded), a fresh encoder
    from ``encoder_factory`` and a fresh ``decoder``, trained by :func:`fit_link_predictor`.
    Returns ``{"seeds", "runs", "metric", "metrics", "split", "val_<metric>", "test_<metric>"...}``
    with each metric's mean and std over the seeds.
    """
    from sgl.models.link_decoders import build_link_decoder

    seeds = list(seeds)
    if not seeds:
        raise ConfigError("seeds must list at least one seed")
    fixed = getattr(graph, "link_split", None)
    if fixed is not None and (val_ratio is not None or test_ratio is not None):
        raise ConfigError(f"dataset {graph.name!r} comes with its own edge split ({fixed.metric}); "
                          f"remove val_ratio/test_ratio (--link-val-ratio/--link-test-ratio)")
    val_ratio = _DEFAULT_RATIOS[0] if val_ratio is None else val_ratio
    test_ratio = _DEFAULT_RATIOS[1] if test_ratio is None else test_ratio
    runs: List[Dict[str, Any]] = []
    for seed in seeds:
        split = fixed if fixed is not None else split_edges(graph, val_ratio, test_ratio, seed=seed,
                                                            neg_ratio=neg_ratio, rounding="floor")
        encoder = encoder_factory()
        head = build_link_decoder(decoder, encoder.num_classes,
                                  **({"num_layers": decoder_layers} if decoder_layers else {}))
        runs.append(fit_link_predictor(encoder, head, split, train_config, seed=seed, neg_ratio=neg_ratio,
                                       hits_k=hits_k))
    metric = check_metric_name(fixed.metric if fixed is not None else "auc")
    names = [k[len("val_"):] for k in runs[0] if k.startswith("val_")]
    record: Dict[str, Any] = {"seeds": seeds, "runs": runs, "metric": metric, "metrics": names,
                              "split": f"{graph.name or 'dataset'}'s own" if fixed is not None else
                              f"random {1 - val_ratio - test_ratio:.0%}/{val_ratio:.0%}/{test_ratio:.0%}"}
    for part in ("val", "test"):
        record.update({f"{part}_{name}": summarize([r[f"{part}_{name}"] for r in runs]) for name in names})
    record["precompute_time_s"] = summarize([r["precompute_time_s"] for r in runs])["mean"]
    record["train_time_s"] = sum(r["train_time_s"] for r in runs)
    return record
