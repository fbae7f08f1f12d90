r"""VF2Boost (SIGMOD 2021): vertical federated GBDT over Paillier, with SecureBoost as the baseline mode.

Parties hold different columns of the same rows; party 0, the **active** party, also holds the
labels and the Paillier key pair. The model is a histogram GBDT (:mod:`sgl.gbdt`): a leaf with
gradient sum ``G`` and hessian sum ``H`` outputs :math:`-\eta G/(H+\lambda)`; a split of a node
into rows with bin code ``<= b`` of one feature and the rest maximises
:math:`G_L^2/(H_L+\lambda) + G_R^2/(H_R+\lambda) - G^2/(H+\lambda)`
(:func:`sgl.gbdt.split.find_best_split`). Per tree, the active party encrypts every row's ``g``
and ``h`` as fixed-point integers (``frac_bits`` fractional bits), the **passive** parties add
them into encrypted per-node histograms, the active party decrypts them and picks the best split
over all parties, and the owner of a passive split tells it which rows go left (the protocol is
in :mod:`sgl.federated.vf2boost_party`). The sums are exact integers, so the trees are those of
the plaintext GBDT on the joined columns with the same bins, up to fixed-point error in the leaf
values (and in the gains, which can only matter for near-ties).

``mode="vf2boost"`` turns on VF2Boost's optimisations (polynomial packing, re-ordered
accumulation with histogram subtraction, the concurrent protocol) and CRT encryption by the key
owner; ``mode="secureboost"`` is the same code without them: one ciphertext per ``g`` and per ``h``,
every node's histogram built and sent bin by bin, one message at a time. ``optimisations``
overrides the set (an ablation). ``encrypt=False`` runs the same protocol on plain integers.

Example (parties as threads; a 512-bit key is for speed only, use ``key_bits >= 1024``):
    >>> import numpy as np, phe
    >>> from sgl.gbdt import GBDTConfig
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(40, 3)); y = (X[:, 0] + X[:, 2] > 0).astype(float)
    >>> cfg = VF2BoostConfig(GBDTConfig(num_trees=1, max_depth=2, max_bins=4, min_child_weight=0.1))
    >>> keys = phe.paillier.generate_paillier_keypair(n_length=512)
    >>> fit = train_vf2boost([X[:, :1], X[:, 1:]], y, cfg, keypair=keys)
    >>> plain = train_vf2boost([X[:, :1], X[:, 1:]], y, VF2BoostConfig(cfg.gbdt, encrypt=False))
    >>> fit.model.trees[0].same_structure(plain.model.trees[0], atol=1e-6), fit.stats["decryptions"] < 20
    (True, True)
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from sgl.errors import CommError, ConfigError, FeatureError
from sgl.federated.gbdt_packing import decode_fixed, encode_fixed
from sgl.federated.vf2boost_party import OPTIMISATIONS, ActiveParty
from sgl.federated.vf2boost_passive import PassiveParty
from sgl.gbdt.binning import BinMapper
from sgl.gbdt.config import GBDTConfig
from sgl.gbdt.grower import grow_tree
from sgl.gbdt.layout import RowLayout
from sgl.gbdt.loss import base_score, check_labels, gradients, sigmoid
from sgl.gbdt.tree import Tree

__all__ = ["VF2BoostConfig", "VF2BoostModel", "VF2BoostResult", "train_vf2boost", "plaintext_trees", "MODES"]

MODES = ("vf2boost", "secureboost")


@dataclass
class VF2BoostConfig:
    """The GBDT's hyper-parameters plus the federated protocol's.

    ``gbdt``: depth-wise :class:`~sgl.gbdt.GBDTConfig`; ``mode``: ``"vf2boost"`` or
    ``"secureboost"``; ``optimisations``: a subset of ``("packing", "reorder", "concurrent",
    "crt")`` replacing the mode's set; ``key_bits``: Paillier modulus size (>= 1024);
    ``frac_bits``: fixed-point fractional bits of ``g`` and ``h``; ``block_rows``: rows per
    streamed block (concurrent protocol); ``encrypt=False``: the protocol in plaintext;
    ``timeout``: seconds a party waits for a message.

    Example:
        >>> VF2BoostConfig(mode="secureboost").active_optimisations()
        ()
    """

    gbdt: GBDTConfig = field(default_factory=lambda: GBDTConfig(num_trees=3, max_depth=3, max_bins=16))
    mode: str = "vf2boost"
    optimisations: Optional[Tuple[str, ...]] = None
    key_bits: int = 1024
    frac_bits: int = 32
    block_rows: int = 128
    encrypt: bool = True
    timeout: float = 120.0

    def validate(self) -> "VF2BoostConfig":
        if not isinstance(self.gbdt, GBDTConfig):
            raise ConfigError(f"gbdt must be a GBDTConfig, got {type(self.gbdt).__name__}")
        self.gbdt.validate()
        if self.gbdt.growth != "depthwise":
            raise ConfigError("VF2Boost grows trees depth-wise (one protocol round per level); set "
                              "GBDTConfig(growth='depthwise')")
        if self.mode not in MODES:
            raise ConfigError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.optimisations is not None and not set(self.optimisations) <= set(OPTIMISATIONS):
            raise ConfigError(f"optimisations must be a subset of {OPTIMISATIONS}, got {self.optimisations!r}")
        for name, lo in (("key_bits", 1024), ("frac_bits", 1), ("block_rows", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                hint = "; smaller Paillier keys are breakable" if name == "key_bits" else ""
                raise ConfigError(f"VF2BoostConfig.{name} must be an int >= {lo}, got {v!r}{hint}")
        if not self.timeout > 0:
            raise ConfigError(f"timeout must be > 0 seconds, got {self.timeout!r}")
        return self

    def active_optimisations(self) -> Tuple[str, ...]:
        if self.optimisations is not None:
            return tuple(self.optimisations)
        return OPTIMISATIONS if self.mode == "vf2boost" else ()

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass
class VF2BoostModel:
    """Trees over the joined columns (feature ids in party order) and each party's binning.

    In a deployment each passive party keeps its own bin edges (``binners[p]``) and applies its
    own splits; here the whole model sits in one object so it can predict on all columns.
    """

    trees: List[Tree]
    base_score: float
    binners: List[BinMapper]
    layout: List[Tuple[int, int]]
    loss: str

    def predict_raw(self, party_features: Sequence[np.ndarray]) -> np.ndarray:
        """The raw score (log-odds for logloss) of rows given as every party's columns."""
        if len(party_features) != len(self.binners):
            raise FeatureError(f"expected columns of {len(self.binners)} parties, got {len(party_features)}")
        codes = np.concatenate([b.transform(np.asarray(x, dtype=np.float64))
                                for b, x in zip(self.binners, party_features)], axis=1)
        return self.base_score + sum(t.predict_binned(codes) for t in self.trees)

    def predict_proba(self, party_features: Sequence[np.ndarray]) -> np.ndarray:
        raw = self.predict_raw(party_features)
        return sigmoid(raw) if self.loss == "logloss" else raw


@dataclass
class VF2BoostResult:
    """The model, the active party's counts (``encryptions``, ``decryptions``, ``hom_adds`` summed over
    parties, ...), ``cipher_bytes`` (every ciphertext crossing a party boundary), per-phase
    ``seconds`` and each party's raw log."""

    model: VF2BoostModel
    stats: Dict[str, Any]
    seconds: Dict[str, float]
    parties: List[Dict[str, Any]]


def _active_labels(labels: Any, num_parties: int) -> Any:
    """``labels`` itself, or entry 0 of a per-party list (``[y, None, ...]``) after checking that no
    passive party holds labels."""
    per_party = isinstance(labels, (list, tuple)) and len(labels) == num_parties and all(
        y is None or isinstance(y, (np.ndarray, list, tuple)) for y in labels)
    if not per_party:
        return labels
    bad = [p for p, y in enumerate(labels) if p > 0 and y is not None]
    if bad:
        raise ConfigError(f"labels given for passive part{'ies' if len(bad) > 1 else 'y'} {bad}; only the active "
                          "party (party 0) holds labels: reorder the parties so that the label owner comes first "
                          "and give the others None")
    return labels[0]


def _check_inputs(party_features: Sequence[np.ndarray], labels: Any) -> List[np.ndarray]:
    if not isinstance(party_features, (list, tuple)) or len(party_features) < 2:
        raise ConfigError("party_features must be a list of at least 2 column blocks, one per party "
                          "(party 0, the active party, first)")
    if labels is None:
        raise ConfigError("labels are missing: the active party (party 0) must hold the labels")
    blocks = []
    for p, x in enumerate(party_features):
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2:
            raise FeatureError(f"party {p}'s columns must be a 2-D [rows, columns] array, got shape {x.shape}")
        if x.shape[1] == 0:
            raise FeatureError(f"party {p} has no columns; drop it from the federation or give it at least "
                               "one feature")
        if x.shape[0] != np.asarray(party_features[0]).shape[0]:
            raise FeatureError(f"party {p} has {x.shape[0]} rows but party 0 has "
                               f"{np.asarray(party_features[0]).shape[0]}; align the rows (same ids, same order)")
        blocks.append(x)
    return blocks


def train_vf2boost(party_features: Sequence[np.ndarray], labels: Any, config: VF2BoostConfig, *,
                   backend: str = "thread", keypair: Optional[Tuple[Any, Any]] = None) -> VF2BoostResult:
    """Train a vertical federated GBDT; ``party_features[0]`` and ``labels`` belong to the active party.

    Each party bins its own columns (:class:`~sgl.gbdt.BinMapper`, ``config.gbdt.max_bins``).
    ``backend="thread"`` runs the parties as threads over :class:`LocalChannel` queues;
    ``"process"`` runs one :func:`sgl.comm.spawn` process per party over :class:`CommChannel`
    (Gloo on 127.0.0.1). ``keypair`` (thread backend only) is a ready ``phe`` key pair, e.g. a
    small one for tests; by default the active party generates a ``config.key_bits`` key.
    ``labels`` are the active party's, or a per-party list ``[y, None, ...]`` in which any entry
    for a passive party is an error (the labels never leave the active party).
    """
    if not isinstance(config, VF2BoostConfig):
        raise ConfigError(f"config must be a VF2BoostConfig, got {type(config).__name__}")
    config.validate()
    labels = _active_labels(labels, len(party_features) if isinstance(party_features, (list, tuple)) else 0)
    blocks = _check_inputs(party_features, labels)
    y = check_labels(config.gbdt.loss, labels, blocks[0].shape[0])
    binners = [BinMapper(config.gbdt.missing).fit(x, config.gbdt.max_bins) for x in blocks]
    codes = [b.transform(x) for b, x in zip(binners, blocks)]
    bins = [b.num_bins for b in binners]
    if backend == "thread":
        logs = _run_threads(codes, bins, y, config, keypair)
    elif backend == "process":
        if keypair is not None:
            raise ConfigError("keypair is for the thread backend; with processes the active party makes its key")
        logs = _run_processes(codes, bins, y, config)
    else:
        raise ConfigError(f"backend must be 'thread' or 'process', got {backend!r}")
    return _result(logs, binners, config)


def _codec(config: VF2BoostConfig, keypair: Optional[Tuple[Any, Any]]):
    from sgl.federated.vf2boost_crypto import PaillierCodec, PlainCodec

    if not config.encrypt:
        return PlainCodec(config.key_bits)
    if keypair is None:
        from sgl.federated.paillier import generate_keypair

        keypair = generate_keypair(config.key_bits)
    return PaillierCodec(keypair[0], keypair[1], crt="crt" in config.active_optimisations())


def _party(rank: int, channel, codes, bins, y, config: VF2BoostConfig, keypair=None):
    opt = config.active_optimisations()
    if rank == 0:
        return ActiveParty(channel, codes[0], y, bins[0], config, _codec(config, keypair), len(codes) - 1, opt)
    return PassiveParty(channel, codes[rank], bins[rank], config, opt)


def _run_threads(codes, bins, y, config, keypair) -> List[Dict[str, Any]]:
    import threading

    from sgl.federated.channel import LocalChannel

    channels = LocalChannel.group(len(codes), timeout=config.timeout)
    parties = [_party(r, channels[r], codes, bins, y, config, keypair) for r in range(len(codes))]
    logs: List[Any] = [None] * len(parties)
    errors: Dict[int, BaseException] = {}

    def body(rank: int) -> None:
        try:
            logs[rank] = parties[rank].train() if rank == 0 else parties[rank].run()
        except BaseException as exc:  # noqa: BLE001 -- re-raised in the caller's thread
            errors[rank] = exc

    workers = [threading.Thread(target=body, args=(r,), name=f"sgl-vf2boost{r}") for r in range(1, len(parties))]
    for w in workers:
        w.start()
    body(0)
    for w in workers:
        w.join()
    if errors:
        rank = min(errors, key=lambda r: (isinstance(errors[r], CommError), r))
        raise errors[rank]
    return logs


def _party_process(rank: int, world: int, codes, bins, y, config: VF2BoostConfig) -> Dict[str, Any]:
    import torch

    from sgl.federated.channel import CommChannel

    torch.set_num_threads(1)
    mine = [c if p == rank else None for p, c in enumerate(codes)]  # a party keeps its own columns only
    party = _party(rank, CommChannel(timeout=config.timeout), mine, bins, y if rank == 0 else None, config)
    return party.train() if rank == 0 else party.run()


def _run_processes(codes, bins, y, config) -> List[Dict[str, Any]]:
    from sgl import comm

    try:
        return comm.spawn(_party_process, len(codes), codes, bins, y, config,
                          timeout=max(600.0, 4 * config.timeout), comm_timeout=config.timeout)
    except CommError as exc:
        errors = getattr(exc, "rank_errors", {})
        if errors and all(kind == "ConfigError" for kind, _ in errors.values()):
            raise ConfigError(next(iter(errors.values()))[1]) from exc
        raise


def _result(logs: List[Dict[str, Any]], binners: List[BinMapper], config: VF2BoostConfig) -> VF2BoostResult:
    active = logs[0]
    trees = [Tree(t["feature"], t["threshold_bin"], t["left"], t["right"], t["value"], t["gain"], t["hess"])
             for t in active["trees"]]
    model = VF2BoostModel(trees, active["base_score"], binners, active["layout"], config.gbdt.loss)
    stats = dict(active["stats"])
    stats["hom_adds"] = sum(log["stats"]["hom_adds"] for log in logs)
    stats["hom_shifts"] = sum(log["stats"]["hom_shifts"] for log in logs)
    stats["cipher_bytes"] = active["cipher_bytes"]
    stats["traffic_bytes"] = active["traffic"].get("bytes_sent", 0) + active["traffic"].get("bytes_received", 0)
    seconds = dict(active["seconds"])
    seconds["accumulate"] = sum(log["seconds"].get("accumulate", 0.0) for log in logs[1:])
    return VF2BoostResult(model, stats, seconds, logs)


def plaintext_trees(party_features: Sequence[np.ndarray], labels: np.ndarray, config: VF2BoostConfig) -> List[Tree]:
    """The single-process :mod:`sgl.gbdt` trees (:func:`sgl.gbdt.grow_tree` on the joined columns, binned
    per party as :func:`train_vf2boost` does) for the same fixed-point gradients: ``g`` and ``h``
    rounded to ``frac_bits`` fractional bits. Their sums are then exact in float64 (while
    ``rows * 2**frac_bits < 2**53``), so the trees must equal the federated ones exactly, ties included.
    """
    config.validate()
    labels = _active_labels(labels, len(party_features))
    blocks = _check_inputs(party_features, labels)
    y = check_labels(config.gbdt.loss, labels, blocks[0].shape[0])
    binners = [BinMapper(config.gbdt.missing).fit(x, config.gbdt.max_bins) for x in blocks]
    num_bins = max(b.num_bins for b in binners)
    codes = np.concatenate([b.transform(x).astype(np.uint16 if num_bins > 256 else np.uint8)
                            for b, x in zip(binners, blocks)], axis=1)
    layout = RowLayout(codes, num_bins)
    raw = np.full(y.shape[0], base_score(config.gbdt.loss, y))
    fb, trees = config.frac_bits, []
    for _ in range(config.gbdt.num_trees):
        g, h = gradients(config.gbdt.loss, y, raw)
        layout.set_gradients(decode_fixed(encode_fixed(g, fb), fb), decode_fixed(encode_fixed(h, fb), fb))
        tree, leaf_of_row = grow_tree(layout, config.gbdt)
        raw = raw + tree.value[leaf_of_row]
        trees.append(tree)
    return trees
