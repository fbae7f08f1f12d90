"""Compatibility name of :mod:`sgl.systems.parallel` (the plan search moved there).

Everything the old ``sgl.systems.plan`` package exported is re-exported here, including the
old names ``SearchConfig`` / ``SearchResult`` for :class:`~sgl.systems.parallel.PlanSearchConfig`
/ :class:`~sgl.systems.parallel.PlanSearchResult` (renamed so they no longer clash with PaSca's
:mod:`sgl.search`).  The old submodules (``sgl.systems.plan.search``, ``.cost``, ``.dp``, ...)
are one-line re-export shims of their ``sgl.systems.parallel`` namesakes -- plain files rather
than ``sys.modules`` aliases, so they work in any import order.  New code imports
:mod:`sgl.systems.parallel`.

>>> from sgl.systems.plan import SearchConfig, PlanSearcher, format_plan
>>> searcher = PlanSearcher(SearchConfig(model="llama-7b", memory_gb=24, batch_sizes=(16,), granularity_mb=64))
>>> plan = searcher.search().plan
>>> plan.to_galvatron()["pp_deg"] >= 1
True
"""
from sgl.systems.parallel import *  # noqa: F401,F403
from sgl.systems.parallel import PlanSearchConfig as SearchConfig
from sgl.systems.parallel import PlanSearchResult as SearchResult
from sgl.systems.parallel import __all__ as _parallel_all

__all__ = sorted(_parallel_all + ["SearchConfig", "SearchResult"])
