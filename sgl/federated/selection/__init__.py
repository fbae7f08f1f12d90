"""Which parties and which rows: VF-MINE / VF-PS and VFPS-SM participant selection, PS-MI valuation, HaCore.

Parties own different columns of the same rows. KNN within a party runs on faiss; across parties,
Fagin's threshold algorithm (:func:`fagin_knn`) finds the joint neighbours from sorted and random
accesses, and a :class:`Ledger` counts what crosses parties. :func:`select_with_parties` runs
VF-PS or VFPS-SM with one :func:`sgl.comm.spawn` process per party; :func:`hacore_with_parties` and
:func:`psmi_with_parties` do the same for HaCore and PS-MI.

Example:
    >>> import numpy as np
    >>> from sgl.federated.selection import vfps_sm_select
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, 120)
    >>> blocks = [rng.normal(size=(120, 2)), y[:, None] + rng.normal(size=(120, 2)) * 0.5]
    >>> vfps_sm_select(blocks, y, l=1).selected
    [1]
"""
from sgl.federated.selection.evaluate import selection_accuracy, weighted_accuracy
from sgl.federated.selection.hacore import (
    Coreset, allocate_bits, cluster_signatures, hacore_coreset, hamming, hamming_kmedoids, initial_medoids, pack_bits,
    raw_kmedoids,
    raw_kmedoids_coreset, simhash_signatures, simhash_words,
)
from sgl.federated.selection.knn import FaginResult, Ledger, LocalParty, brute_force_knn, fagin_knn
from sgl.federated.selection.mi import mi_from_distances, mi_from_ranks
from sgl.federated.selection.psmi import (
    ValuationResult, exact_shapley, mi_utility, psmi_values, random_projection, stratified_coalitions,
    stratified_shapley,
)
from sgl.federated.selection.remote import RemotePaillierSum, RemoteParty, select_with_parties, serve_party
from sgl.federated.selection.remote_data import hacore_with_parties, psmi_with_parties
from sgl.federated.selection.secure import PaillierSum, PlainSum
from sgl.federated.selection.vfps import SelectionResult, group_testing_values, vf_mine, vfps_select
from sgl.federated.selection.vfps_sm import (
    facility_value, greedy_select, joint_likelihood, knn_likelihoods, lazy_greedy, vfps_sm_select,
)

__all__ = [
    "Ledger", "LocalParty", "FaginResult", "fagin_knn", "brute_force_knn",
    "mi_from_ranks", "mi_from_distances",
    "SelectionResult", "vf_mine", "group_testing_values", "vfps_select",
    "knn_likelihoods", "facility_value", "greedy_select", "joint_likelihood", "lazy_greedy", "vfps_sm_select",
    "ValuationResult", "random_projection", "exact_shapley", "stratified_coalitions", "stratified_shapley",
    "mi_utility", "psmi_values",
    "Coreset", "allocate_bits", "simhash_signatures", "pack_bits", "hamming", "hamming_kmedoids", "raw_kmedoids",
    "hacore_coreset", "raw_kmedoids_coreset", "simhash_words", "initial_medoids", "cluster_signatures",
    "selection_accuracy", "weighted_accuracy",
    "RemoteParty", "RemotePaillierSum", "serve_party", "select_with_parties", "hacore_with_parties",
    "psmi_with_parties",
    "PlainSum", "PaillierSum",
]
