"""Compatibility shim: :mod:`sgl.systems.parallel.search` (and ``search_config``) under the old name.

``SearchConfig`` / ``SearchResult`` are the old names of ``PlanSearchConfig`` / ``PlanSearchResult``;
``_exact_partition`` is :func:`sgl.systems.parallel.partition.exact_partition`.
"""
from sgl.systems.parallel.partition import exact_partition as _exact_partition  # noqa: F401
from sgl.systems.parallel.search import PlanSearcher, search_plan
from sgl.systems.parallel.search_config import BASELINES, PARTITIONS
from sgl.systems.parallel.search_config import PlanSearchConfig as SearchConfig
from sgl.systems.parallel.search_config import PlanSearchResult as SearchResult

__all__ = ["SearchConfig", "SearchResult", "PlanSearcher", "search_plan", "BASELINES", "PARTITIONS"]
