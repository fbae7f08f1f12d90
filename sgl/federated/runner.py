"""Running a federation: one process per party (:func:`train_federated`), or the centralised
reference (:func:`train_centralised`) that split learning with no defense must equal.

:func:`train_federated` validates the split, cuts the tables into party views, checks their
sample ids, and runs :func:`run_party` in one :func:`sgl.comm.spawn` process per party (Gloo on
127.0.0.1). Under ``torchrun`` across machines each party calls :func:`run_party` itself with
only its own views. The harness, which also holds the labels, scores the passive parties'
label-inference attacks (:func:`attack_report`); the labels never travel to a passive party.

Example:
    >>> from sgl.datasets.ctr import make_synthetic_ctr
    >>> from sgl.federated import FederatedConfig, default_split
    >>> train, val, test = make_synthetic_ctr(600, [30, 30, 30, 30], num_dense=2, seed=0).split()
    >>> config = FederatedConfig(embed_dim=4, hidden=[8], batch_size=64, max_steps=3)
    >>> losses = train_centralised(train, default_split(train), config)
    >>> len(losses)
    3
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from sgl.errors import CommError, ConfigError
from sgl.federated.attacks import leak_auc, roc_auc
from sgl.federated.channel import CommChannel, LocalChannel
from sgl.federated.config import FederatedConfig
from sgl.federated.link import WANLink
from sgl.federated.models import SplitCTRModel, out_fields
from sgl.federated.party import SplitParty, batch_order, make_optimizer
from sgl.federated.split import FieldSplit, PartyView, check_aligned

__all__ = ["train_federated", "train_centralised", "run_party", "attack_report", "party_views"]


def party_views(split: FieldSplit, train, val, test, sample_ids: Optional[Sequence[np.ndarray]] = None
                ) -> List[Dict[str, PartyView]]:
    """``[{"train", "val", "test"} views]`` per party; ``sample_ids`` (per party) replace the
    training rows' ids (to test alignment)."""
    per_split = {"train": split.views(train, sample_ids), "val": split.views(val), "test": split.views(test)}
    return [{k: per_split[k][p] for k in per_split} for p in range(split.num_parties)]


def run_party(rank: int, world_size: int, views: List[Dict[str, PartyView]], config: FederatedConfig,
              threads: int = 1) -> Dict[str, Any]:
    """Body of one party process (``comm`` already initialised): train and return its log.

    ``views`` holds every party's views for spawning convenience; the party keeps only its own.
    """
    torch.set_num_threads(threads)
    mine = views[rank]
    layout = out_fields([v["train"] for v in views])
    del views  # a party keeps its own columns only
    channel = CommChannel(WANLink(config.bandwidth_mbps, config.latency_ms), timeout=config.timeout)
    return SplitParty(rank, world_size, mine, layout, config, channel).train()


def attack_report(party_log: Dict[str, Any], labels: np.ndarray, seed: int = 0) -> Dict[str, float]:
    """Mean per-batch leak AUC (``max(AUC, 1-AUC)``) of a passive party's norm and direction scores,
    scored against the true ``labels`` of the training rows (batches with one class are skipped).

    ``max(AUC, 1-AUC)`` lets the harness pick each batch's orientation with the labels, so it
    exceeds 0.5 even for a blind attacker: ``chance_auc`` is the same statistic for uniformly
    random scores on the same batches (the floor, about ``0.5 + 0.8 / sqrt(12 n1 n0 / (n + 1))``).
    ``*_oriented`` are plain AUCs with the attack's a-priori orientation (larger norm, or larger
    minus-mean-cosine, means positive), what an attacker without labels can actually use.
    """
    rng = np.random.default_rng(seed)
    norms, dirs, chance, norm_o, dir_o = [], [], [], [], []
    for rows, norm, direction in party_log.get("attack", []):
        y = labels[rows]
        if 0 < y.sum() < len(y):
            norms.append(leak_auc(norm, y))
            dirs.append(leak_auc(direction, y))
            chance.append(leak_auc(rng.random(len(y)), y))
            norm_o.append(roc_auc(norm, y))
            dir_o.append(roc_auc(direction, y))
    mean = lambda v: float(np.mean(v)) if v else float("nan")  # noqa: E731
    return {"norm_auc": mean(norms), "direction_auc": mean(dirs), "chance_auc": mean(chance),
            "norm_auc_oriented": mean(norm_o), "direction_auc_oriented": mean(dir_o), "batches": len(norms)}


def _run_threads(views: List[Dict[str, PartyView]], config: FederatedConfig) -> List[Dict[str, Any]]:
    """Every party in a thread of this process, over :class:`LocalChannel` queues."""
    import threading

    layout = out_fields([v["train"] for v in views])
    link = WANLink(config.bandwidth_mbps, config.latency_ms)
    channels = LocalChannel.group(len(views), link, timeout=config.timeout)
    # built one after another: model initialisation forks the global RNG, which is not thread-safe
    parties = [SplitParty(r, len(views), v, layout, config, channels[r]) for r, v in enumerate(views)]
    logs: List[Any] = [None] * len(parties)
    errors: Dict[int, BaseException] = {}

    def body(rank: int) -> None:
        try:
            logs[rank] = parties[rank].train()
        except BaseException as exc:  # noqa: BLE001 -- re-raised in the caller's thread
            errors[rank] = exc

    workers = [threading.Thread(target=body, args=(r,), name=f"sgl-party{r}") for r in range(1, len(parties))]
    for w in workers:
        w.start()
    body(0)
    for w in workers:
        w.join()
    if errors:  # the root cause first: a CommError is usually the peers' reaction to it
        rank = min(errors, key=lambda r: (isinstance(errors[r], CommError), r))
        raise errors[rank]
    return logs


def train_federated(train, val, test, split: FieldSplit, config: FederatedConfig,
                    sample_ids: Optional[Sequence[np.ndarray]] = None, timeout: Optional[float] = None,
                    threads: int = 1, backend: str = "process") -> Dict[str, Any]:
    """Train a split CTR model with one process per party of ``split`` (party 0 active).

    ``backend="thread"`` runs the same parties as threads over in-process queues (the same
    protocol, messages and byte counts; no process start-up), for sweeps and tests.

    Returns ``{"parties": [log per party], "test_auc", "val_auc", "losses", "attack": {rank:
    report}, "traffic": party 0's meter summary, ...}``. ``timeout`` bounds the whole run
    (default: generous); a party that dies or hangs makes the others raise ``CommError`` within
    ``config.timeout`` seconds.
    """
    from sgl import comm

    if not isinstance(config, FederatedConfig):
        raise ConfigError(f"config must be a FederatedConfig, got {type(config).__name__}")
    views = party_views(split, train, val, test, sample_ids)
    check_aligned([v["train"].sample_ids for v in views], split.names)
    if backend not in ("process", "thread"):
        raise ConfigError(f"backend must be 'process' or 'thread', got {backend!r}")
    if backend == "thread":
        return _summarise(_run_threads(views, config), config, train)
    try:
        logs = comm.spawn(run_party, split.num_parties, views, config, threads,
                          timeout=timeout or max(600.0, 4 * config.timeout), comm_timeout=config.timeout)
    except CommError as exc:
        errors = getattr(exc, "rank_errors", {})
        if errors and all(kind == "ConfigError" for kind, _ in errors.values()):
            raise ConfigError(next(iter(errors.values()))[1]) from exc
        raise
    return _summarise(logs, config, train)


def _summarise(logs: List[Dict[str, Any]], config: FederatedConfig, train) -> Dict[str, Any]:
    active = logs[0]
    result = {k: active.get(k) for k in ("test_auc", "test_logloss", "val_auc", "losses", "curve", "traffic",
                                        "eval_traffic", "defense_seconds", "noise_wait_seconds", "step_seconds", "local_steps",
                                        "observed")}
    result["parties"] = logs
    if config.attack:
        result["attack"] = {p: attack_report(logs[p], np.asarray(train.labels)) for p in range(1, len(logs))}
    return result


def train_centralised(train, split: FieldSplit, config: FederatedConfig) -> List[float]:
    """The same split model, parts, seeds and batch order trained in one process on the joined
    columns; returns the loss of every step (what split learning with no defense must equal)."""
    if config.defense != "none" or config.local_steps or config.rake or config.blindfl:
        raise ConfigError("the centralised reference has no defense, CELU local steps, Rake or BlindFL; turn them "
                          "off (BlindFL's plaintext twin is split learning with passive_optimizer='sgd')")
    views = split.views(train)
    model = SplitCTRModel.build(views, config.model, config.embed_dim, config.hidden, config.bottom_hidden,
                                config.embedding, config.seed, config.dropout)
    # one optimizer per part, in the parties' parameter order (per-parameter optimizers: same result)
    optimizers = [make_optimizer(list(model.bottoms[0].parameters()) + list(model.top.parameters()), config)] + \
        [make_optimizer(b.parameters(), config, passive=True) for b in model.bottoms[1:]]
    labels = torch.as_tensor(views[0].labels)
    weight = torch.tensor(config.pos_weight)
    losses = []
    for rows in batch_order(len(train), config):
        dense = [torch.as_tensor(v.dense[rows]) for v in views]
        ids = [torch.as_tensor(v.sparse[rows]) for v in views]
        loss = F.binary_cross_entropy_with_logits(model(dense, ids), labels[rows], pos_weight=weight)
        for opt in optimizers:
            opt.zero_grad()
        loss.backward()
        for opt in optimizers:
            opt.step()
        losses.append(float(loss.detach()))
    return losses
