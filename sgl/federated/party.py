r"""One party of vertical split learning: :class:`SplitParty`.

Party 0 is the **active** party (labels, its bottom model, the top model); parties 1.. are
**passive** (a bottom model over their own columns). One round trip per batch:

1. every passive party computes :math:`h_p = f_p(x_p)` and sends it to party 0 (``act``);
2. party 0 computes its own bottom output, the top model and the batch-mean weighted BCE,
   back-propagates, updates its parts with the clean gradients, and sends each passive party
   :math:`g_p=\partial L/\partial h_p`, perturbed by the configured defense (``grad``);
3. each passive party back-propagates ``g_p`` into its bottom model and updates it.

Nothing else crosses a party boundary: raw features, labels and weights stay where they are.
Every party reads the same seeded batch order (the active party would send the seed).
Options on top of that round (see :class:`~sgl.federated.config.FederatedConfig`): passive
label-inference scoring, CELU-VFL local updates from the workset cache, Rake's two bottom
models, and recording what the active party observes.

A party talks through any :class:`~sgl.federated.channel.Channel`; :func:`run_party` is the
entry point of one process in :func:`~sgl.federated.runner.train_federated`.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from sgl.errors import ConfigError
from sgl.federated.attacks import direction_scores, norm_scores, roc_auc
from sgl.federated.blindfl import BlindSourceFeatureSide, BlindSourceLabelSide, source_inputs, source_weight
from sgl.federated.celu import Workset, instance_weights
from sgl.federated.channel import Channel
from sgl.federated.config import FederatedConfig
from sgl.federated.defenses import GAUSSIAN_DEFENSES, perturb
from sgl.federated.noise import NoiseAhead
from sgl.federated.rake import rake_loss, rake_twin
from sgl.federated.models import build_bottom, build_top
from sgl.federated.split import PartyView, check_aligned

__all__ = ["SplitParty", "make_optimizer", "batch_order"]


def make_optimizer(params, config: FederatedConfig, passive: bool = False) -> torch.optim.Optimizer:
    """The configured optimizer over ``params`` (per-parameter, so parts can be split freely);
    ``passive`` picks ``passive_optimizer`` / ``passive_lr`` where set."""
    params = list(params)
    name = (config.passive_optimizer or config.optimizer) if passive else config.optimizer
    lr = (config.passive_lr or config.lr) if passive else config.lr
    if name == "adam":
        return torch.optim.Adam(params, lr=lr)
    if name == "adagrad":
        return torch.optim.Adagrad(params, lr=lr)
    return torch.optim.SGD(params, lr=lr)


def batch_order(n: int, config: FederatedConfig) -> List[np.ndarray]:
    """Every batch's row indices, epoch after epoch (the shared seeded order), cut at ``max_steps``."""
    batches: List[np.ndarray] = []
    for epoch in range(config.epochs):
        perm = np.random.default_rng(config.seed + 7919 * epoch).permutation(n)
        batches += [perm[i:i + config.batch_size] for i in range(0, n, config.batch_size)]
    return batches[:config.max_steps] if config.max_steps else batches


class SplitParty:
    """Party ``rank`` of ``num_parties``, holding its ``views`` (``train``, ``val``, ``test``).

    ``out_fields`` lists every party's bottom output fields (the top model's input layout; the
    architecture is public, the weights are not).
    """

    def __init__(self, rank: int, num_parties: int, views: Dict[str, PartyView], out_fields: Sequence[int],
                 config: FederatedConfig, channel: Channel, device: Optional[torch.device] = None) -> None:
        self.rank, self.num_parties, self.config, self.channel = rank, num_parties, config, channel
        self.active = rank == 0
        self.views = views
        self.device = torch.device(device) if device is not None else torch.empty(0).device
        train = views["train"]
        if self.active and train.labels is None:
            raise ConfigError("the active party (party 0) must hold the labels")
        cfg = config
        self.bottoms = [build_bottom(train, rank, cfg.embed_dim, cfg.bottom_hidden, cfg.embedding, cfg.seed)]
        if cfg.rake and not self.active:
            self.bottoms.append(rake_twin(self.bottoms[0], train, rank, cfg.embed_dim, cfg.bottom_hidden,
                                          cfg.embedding, cfg.seed))
        self.top = build_top(cfg.model, out_fields, cfg.embed_dim, train.num_dense, cfg.hidden, cfg.seed,
                             cfg.dropout) if self.active else None
        modules = self.bottoms + ([self.top] if self.top is not None else [])
        for m in modules:
            m.to(self.device)
        # a BlindFL passive party's bottom only seeds the source layer; the layer trains itself by SGD
        self.optimizer = None if cfg.blindfl and not self.active else \
            make_optimizer([p for m in modules for p in m.parameters()], cfg, passive=not self.active)
        self.sources: Dict[int, Any] = {}  # BlindFL source layers, set up once the peers are listening
        self.workset = Workset(cfg.workset, cfg.max_uses, seed=cfg.seed * 31 + rank)
        self.noise = torch.Generator(device=self.device).manual_seed(cfg.seed * 101 + rank)
        self.selector = torch.Generator(device=self.device).manual_seed(cfg.seed * 211 + rank)
        # a Gaussian defense's noise for the next batch is drawn while the party waits for activations
        gaussian = str(cfg.defense).lower().replace("_", "-") in GAUSSIAN_DEFENSES
        self.noise_ahead = NoiseAhead(cfg.seed * 307 + rank, self.device) if self.active and gaussian else None
        self.updates = 0
        self.log: Dict[str, Any] = {"losses": [], "curve": [], "attack": [], "defense_seconds": 0.0, "noise_wait_seconds": 0.0,
                                    "step_seconds": 0.0, "local_steps": 0}

    # -- data -----------------------------------------------------------------------------------
    def _batch(self, view: PartyView, rows: np.ndarray):
        dense = torch.as_tensor(view.dense[rows], device=self.device)
        ids = torch.as_tensor(view.sparse[rows], device=self.device)
        labels = None if view.labels is None else torch.as_tensor(view.labels[rows], device=self.device)
        return dense, ids, labels

    def bottom_forward(self, dense: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """The activation this party exposes; with Rake, a private coin picks a bottom per row."""
        if len(self.bottoms) == 1:
            return self.bottoms[0](dense, ids)
        f1, f2 = self.bottoms[0](dense, ids), self.bottoms[1](dense, ids)
        coin = torch.rand(f1.shape[0], generator=self.selector, device=self.device) < 0.5
        self._rake_pair = (f1, f2, coin)
        return torch.where(coin[:, None, None], f1, f2)

    def _rake_loss(self, g: Optional[torch.Tensor] = None) -> torch.Tensor:
        return rake_loss(*self._rake_pair, g, self.config.rake_weight, self.config.rake_consistency)

    def _loss(self, logits: torch.Tensor, labels: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
        weight = torch.full((), self.config.pos_weight, device=logits.device, dtype=logits.dtype)
        return F.binary_cross_entropy_with_logits(logits, labels, pos_weight=weight, reduction=reduction)

    def _receive_fields(self, peer: int, kind: str) -> torch.Tensor:
        """Passive party ``peer``'s field outputs: its activation, or (BlindFL) the source layer's Z."""
        if self.config.blindfl:
            return self.sources[peer].forward().to(self.device)
        return self.channel.recv(peer, kind).to(self.device)

    def setup_blindfl(self) -> None:
        """Key exchange and weight shares of every BlindFL source layer (the active party is B, the
        label party, in each pair; a passive party's seeded bottom is the public initialisation)."""
        cfg = self.config
        if not cfg.blindfl:
            return
        if self.active:
            for p in range(1, self.num_parties):
                rows, k = int(self.channel.recv(p, "ctrl")[0]), cfg.embed_dim
                self.sources[p] = BlindSourceLabelSide(self.channel, p, rows, k, key_bits=cfg.key_bits,
                                                       seed=cfg.seed * 131 + p, frac_bits=cfg.frac_bits,
                                                       random_init=False)
            return
        weight = source_weight(self.bottoms[0])
        self.channel.send(torch.tensor([weight.shape[0]], dtype=torch.int64), 0, "ctrl")  # the public layer size
        self.sources[0] = BlindSourceFeatureSide(self.channel, 0, weight.shape[0], cfg.embed_dim,
                                                 seed=cfg.seed * 137 + self.rank, frac_bits=cfg.frac_bits,
                                                 init_weight=weight)

    # -- one round trip -------------------------------------------------------------------------
    def check_alignment(self) -> None:
        """Party 0 compares every party's training sample ids with its own; all raise on a mismatch."""
        ids = torch.as_tensor(self.views["train"].sample_ids, dtype=torch.int64)
        if not self.active:
            self.channel.send(ids, 0, "ids")
            ok = self.channel.recv(0, "ctrl")
            if int(ok[0]) != 1:
                raise ConfigError(f"party {self.rank}'s sample ids do not align with the active party's (it checked "
                                  "them); intersect and order the ids (PSI) before training")
            return
        others = [self.channel.recv(p, "ids").cpu().numpy() for p in range(1, self.num_parties)]
        try:
            check_aligned([ids.cpu().numpy()] + others)
            verdict = 1
        except ConfigError:
            verdict = 0
            raise
        finally:
            for p in range(1, self.num_parties):
                self.channel.send(torch.tensor([verdict], dtype=torch.int64), p, "ctrl")

    def train_step(self, batch_id: int, rows: np.ndarray) -> Optional[float]:
        """One vanilla round trip on ``rows``; returns the loss at the active party."""
        start = time.perf_counter()
        dense, ids, labels = self._batch(self.views["train"], rows)
        ch, loss_value = self.channel, None
        if self.config.blindfl and not self.active:
            self.sources[0].forward(*source_inputs(self.views["train"].dense[rows], self.views["train"].sparse[rows],
                                                   self.views["train"].field_dims))
            self.sources[0].backward(self.config.passive_lr or self.config.lr)
        elif self.active:
            hs = [self._receive_fields(p, "act").requires_grad_() for p in range(1, self.num_parties)]
            h0 = self.bottom_forward(dense, ids)
            loss = self._loss(self.top(dense, torch.cat([h0] + hs, dim=1)), labels)
            self.optimizer.zero_grad()
            loss.backward()
            for p, h in enumerate(hs, start=1):
                if self.config.blindfl:  # B encrypts dL/dZ; the weight update happens under encryption
                    self.sources[p].backward(h.grad, self.config.passive_lr or self.config.lr)
                    continue
                t0 = time.perf_counter()
                z = None if self.noise_ahead is None else self.noise_ahead.take((h.shape[0], h[0].numel()))
                self.log["noise_wait_seconds"] += time.perf_counter() - t0  # the draw, if not done ahead yet
                g = perturb(self.config.defense, h.grad, labels, bound=self.config.sumkl_bound,
                            scale=self.config.marvell_scale, generator=self.noise, noise=z)
                self.log["defense_seconds"] += time.perf_counter() - t0
                ch.send(g, p, "grad")
                if self.noise_ahead is not None:   # the next batch's, drawn while we wait for its activations
                    # at most a full batch: a shorter one takes the first rows, so no epoch boundary misses
                    self.noise_ahead.prefetch((max(h.shape[0], self.config.batch_size), h[0].numel()))
            self.optimizer.step()
            loss_value = float(loss.detach())
            self.log["losses"].append(loss_value)
            if self.config.local_steps:
                self.workset.add(batch_id, rows, [h.detach() for h in hs], [h.grad.detach().clone() for h in hs],
                                 self.updates)
        else:
            h = self.bottom_forward(dense, ids)
            ch.send(h, 0, "act")
            g = ch.recv(0, "grad").to(self.device)
            if self.config.attack:
                self.log["attack"].append((rows.copy(), norm_scores(g).cpu().numpy(),
                                           direction_scores(g).cpu().numpy()))
            self.optimizer.zero_grad()
            surrogate = (h * g).sum()
            if len(self.bottoms) > 1:
                surrogate = surrogate + self._rake_loss(g)
            surrogate.backward()
            self.optimizer.step()
            if self.config.local_steps:
                self.workset.add(batch_id, rows, h.detach(), g, self.updates)
        self.updates += 1
        ch.meter.end_round()
        self.log["step_seconds"] += time.perf_counter() - start
        return loss_value

    def local_step(self) -> bool:
        """One CELU-VFL local update from the workset (no communication); False when it is empty."""
        entry = self.workset.draw(self.updates)
        if entry is None:
            return False
        start = time.perf_counter()
        dense, ids, labels = self._batch(self.views["train"], entry.rows)
        self.optimizer.zero_grad()
        if self.active:
            cached = [h.clone().requires_grad_() for h in entry.h]
            h0 = self.bottom_forward(dense, ids)
            losses = self._loss(self.top(dense, torch.cat([h0] + cached, dim=1)), labels, reduction="none")
            current = torch.autograd.grad(losses.mean(), cached, retain_graph=True)
            w = instance_weights(torch.cat([c.flatten(1) for c in current], 1),
                                 torch.cat([g.flatten(1) for g in entry.g], 1), self.config.xi)
            (w.detach() * losses).mean().backward()
        else:
            h = self.bottom_forward(dense, ids)
            w = instance_weights(h.detach(), entry.h, self.config.xi)
            surrogate = (h * (w.view(-1, 1, 1) * entry.g)).sum()
            if len(self.bottoms) > 1:
                surrogate = surrogate + self._rake_loss(w.view(-1, 1, 1) * entry.g)
            surrogate.backward()
        self.optimizer.step()
        self.updates += 1
        self.log["local_steps"] += 1
        self.log["step_seconds"] += time.perf_counter() - start
        return True

    # -- evaluation ----------------------------------------------------------------------------
    def evaluate(self, split: str, rows: Optional[np.ndarray] = None, record: bool = False) -> Dict[str, Any]:
        """Forward-only pass over ``split`` (its ``rows``): AUC and log-loss at party 0.

        Its traffic is metered apart from training rounds. With ``record`` party 0 keeps the
        activations it received (what a curious server observes).
        """
        view = self.views[split]
        rows = np.arange(len(view)) if rows is None else np.asarray(rows)
        chunk = max(self.config.batch_size, 1024)
        training_meter = self.channel.meter
        self.channel.meter = self._eval_meter = getattr(self, "_eval_meter", None) or \
            type(training_meter)(training_meter.link)
        logits, seen = [], {p: [] for p in range(1, self.num_parties)}
        try:
            for m in self.bottoms + ([self.top] if self.top is not None else []):
                m.eval()
            with torch.no_grad():
                for i in range(0, len(rows), chunk):
                    dense, ids, _ = self._batch(view, rows[i:i + chunk])
                    if not self.active:
                        if self.config.blindfl:
                            r = rows[i:i + chunk]
                            self.sources[0].forward(*source_inputs(view.dense[r], view.sparse[r], view.field_dims))
                        else:
                            self.channel.send(self.bottom_forward(dense, ids), 0, "eval")
                        continue
                    hs = [self._receive_fields(p, "eval") for p in range(1, self.num_parties)]
                    if record:
                        for p, h in enumerate(hs, start=1):
                            seen[p].append(h.cpu().numpy())
                    logits.append(self.top(dense, torch.cat([self.bottom_forward(dense, ids)] + hs, dim=1)))
        finally:
            for m in self.bottoms + ([self.top] if self.top is not None else []):
                m.train()
            self.channel.meter = training_meter
        if not self.active:
            return {}
        out = torch.cat(logits) if logits else torch.zeros(0, device=self.device)
        labels = view.labels[rows]
        probs = torch.sigmoid(out).cpu().numpy().astype(np.float64)
        p = np.clip(probs, 1e-7, 1 - 1e-7)
        result = {"auc": roc_auc(probs, labels),
                  "logloss": float(-(labels * np.log(p) + (1 - labels) * np.log(1 - p)).mean()) if len(p) else
                  float("nan")}
        if record:
            result["observed"] = {p: np.concatenate(v) if v else np.zeros((0,)) for p, v in seen.items()}
        return result

    # -- the whole run -------------------------------------------------------------------------
    def train(self) -> Dict[str, Any]:
        """Align ids, train (vanilla rounds + CELU local steps), evaluate; return this party's log."""
        cfg = self.config
        self.check_alignment()
        self.setup_blindfl()
        batches = batch_order(len(self.views["train"]), cfg)
        per_epoch = -(-len(self.views["train"]) // cfg.batch_size)
        every = cfg.eval_every or per_epoch
        for step, rows in enumerate(batches):
            self.train_step(step, rows)
            for _ in range(cfg.local_steps):
                if not self.local_step():
                    break
            if (step + 1) % every == 0 or step + 1 == len(batches):
                val = self.evaluate("val")
                if self.active:
                    meter = self.channel.meter
                    self.log["curve"].append({"round": meter.rounds, "link_seconds": meter.link_seconds,
                                              "compute_seconds": self.log["step_seconds"], "val_auc": val["auc"]})
        if self.noise_ahead is not None:
            self.noise_ahead.close()
            self.log["noise_prefetched"] = self.noise_ahead.hits
        test = self.evaluate("test", record=cfg.observe > 0)
        out = dict(self.log, traffic=self.channel.meter.summary(), rank=self.rank, updates=self.updates)
        if cfg.observe:
            aux = self.evaluate("train", rows=np.arange(min(cfg.observe, len(self.views["train"]))), record=True)
            if self.active:
                out["observed"] = {p: {"aux": aux["observed"][p], "test": test["observed"][p]}
                                   for p in range(1, self.num_parties)}
        eval_meter = getattr(self, "_eval_meter", None)
        out["eval_traffic"] = eval_meter.summary() if eval_meter is not None else {}
        if self.active:
            out.update(test_auc=test["auc"], test_logloss=test["logloss"],
                       val_auc=self.log["curve"][-1]["val_auc"] if self.log["curve"] else float("nan"))
        return out
