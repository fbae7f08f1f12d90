"""Vertical federated learning: split learning of CTR models with parties as processes, label-leakage
attacks and defenses (max-norm, Marvell, ProjPert), Rake, CELU-VFL and BlindFL; federated GBDT
(VF2Boost, with SecureBoost as its baseline mode, over Paillier); participant selection and data
valuation (``sgl.federated.selection``: VF-MINE/VF-PS, VFPS-SM, PS-MI, HaCore).

Parties own different columns of the same rows (:class:`FieldSplit`); party 0 is the active
party, with the labels and the top model. Every tensor that crosses a party boundary goes
through a :class:`Channel` over :mod:`sgl.comm` and is counted; a :class:`WANLink` turns the
counted bytes into modelled wide-area time. See ``docs/federated.md`` for each method's threat
model.

Example:
    >>> from sgl.datasets.ctr import make_synthetic_ctr
    >>> from sgl.federated import FederatedConfig, default_split, train_centralised
    >>> train, val, test = make_synthetic_ctr(400, [20, 20, 20], num_dense=2, seed=0).split()
    >>> split = default_split(train)
    >>> split.names
    ['guest', 'host']
    >>> len(train_centralised(train, split, FederatedConfig(embed_dim=4, hidden=[8], batch_size=64)))
    5

``train_federated(train, val, test, split, config)`` runs the same with one process per party.
"""
from sgl.federated.attacks import direction_scores, leak_auc, norm_scores, roc_auc
from sgl.federated.celu import Workset, instance_weights
from sgl.federated.channel import Channel, CommChannel, LocalChannel
from sgl.federated.config import FederatedConfig
from sgl.federated.defenses import (
    DEFENSES, diagonal_sumkl, marvell, marvell_solve, max_norm, pair_sumkl, perturb, projpert, projpert_budgets,
    projpert_targets,
)
from sgl.federated.link import TrafficMeter, WANLink
from sgl.federated.models import PartyBottom, SplitCTRModel, StagedEmbedding, TopModel
from sgl.federated.party import SplitParty
from sgl.federated.runner import attack_report, party_views, run_party, train_centralised, train_federated
from sgl.federated.rake import (
    RakeTwin, invert_dense, rake_attack, rake_loss, rake_twin, surrogate_error, train_surrogate,
)
from sgl.federated.split import FieldSplit, PartyView, check_aligned, default_split, load_split
from sgl.federated.gbdt_packing import SlotPacker
from sgl.federated.vf2boost import VF2BoostConfig, VF2BoostModel, VF2BoostResult, plaintext_trees, train_vf2boost

_SELECTION_NAMES = ("fagin_knn", "vfps_select", "vfps_sm_select", "psmi_values", "exact_shapley", "hacore_coreset",
                    "select_with_parties", "hacore_with_parties", "psmi_with_parties", "PaillierSum", "Ledger")

__all__ = [
    "FieldSplit", "PartyView", "check_aligned", "default_split", "load_split",
    "WANLink", "TrafficMeter", "Channel", "CommChannel", "LocalChannel",
    "PartyBottom", "StagedEmbedding", "TopModel", "SplitCTRModel",
    "FederatedConfig", "SplitParty", "train_federated", "train_centralised", "run_party", "attack_report",
    "party_views",
    "norm_scores", "direction_scores", "roc_auc", "leak_auc",
    "DEFENSES", "perturb", "max_norm", "marvell", "marvell_solve", "projpert", "projpert_targets", "projpert_budgets",
    "diagonal_sumkl", "pair_sumkl",
    "Workset", "instance_weights",
    "train_surrogate", "surrogate_error", "invert_dense", "rake_attack", "RakeTwin", "rake_twin", "rake_loss",
    "SlotPacker", "VF2BoostConfig", "VF2BoostModel", "VF2BoostResult", "plaintext_trees", "train_vf2boost",
    "selection", *_SELECTION_NAMES,
]

#: participant selection and valuation (sgl.federated.selection), imported on first use (faiss)
_SELECTION = _SELECTION_NAMES


def __getattr__(name: str):
    if name in _SELECTION or name == "selection":
        import importlib

        module = importlib.import_module("sgl.federated.selection")
        return module if name == "selection" else getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
