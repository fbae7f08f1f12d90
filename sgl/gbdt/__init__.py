"""Histogram gradient-boosted decision trees (``sgl.gbdt``).

Binning (:class:`BinMapper`, :class:`SparseBins`), histograms with the
subtraction trick, depth-wise and leaf-wise growth, logloss and squared loss
(:class:`GBDT`, :class:`GBDTConfig`); split finding shared with the federated
GBDT (:func:`find_best_split`, :func:`split_gain`, :func:`leaf_value`); Vero's
four distributed quadrants (:mod:`sgl.gbdt.vero`) and DimBoost's sparse,
low-precision histograms with a parameter-server split finder
(:mod:`sgl.gbdt.dimboost`).

>>> from sgl.gbdt import GBDTConfig
>>> GBDTConfig(num_trees=3).num_trees
3
"""
from sgl.gbdt.binning import BinMapper
from sgl.gbdt.boosting import BoostResult, boost
from sgl.gbdt.config import GBDTConfig
from sgl.gbdt.grower import grow_tree
from sgl.gbdt.histogram import (
    build_histogram, build_histogram_columns, build_histogram_csr, subtract,
)
from sgl.gbdt.layout import ColumnLayout, CSRLayout, RowLayout
from sgl.gbdt.model import GBDT
from sgl.gbdt.sparse import SparseBins
from sgl.gbdt.split import SplitInfo, find_best_split, leaf_value, split_gain
from sgl.gbdt.tree import Tree

#: distributed and run-level names, imported on first use (they pull in torch and sgl.comm)
_LAZY = {
    "QUADRANTS": "vero", "fit_quadrant": "vero", "make_layout": "vero", "agree_split": "vero",
    "PRECISIONS": "dimboost", "fit_dimboost": "dimboost", "DimBoostLayout": "dimboost",
    "CommMeter": "meter", "train_gbdt": "run",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"sgl.gbdt.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'sgl.gbdt' has no attribute {name!r}")


__all__ = [
    *_LAZY,
    "BinMapper", "SparseBins", "GBDTConfig", "GBDT", "Tree", "SplitInfo", "find_best_split",
    "leaf_value", "split_gain", "build_histogram", "build_histogram_columns",
    "build_histogram_csr", "subtract", "grow_tree", "boost", "BoostResult", "RowLayout",
    "ColumnLayout", "CSRLayout",
]
