"""The old import paths of the plan search, executor and profiler keep working."""
import importlib

import pytest

import sgl.systems.parallel as parallel
import sgl.systems.runtime as runtime


def test_plan_package_reexports_parallel_with_old_names():
    import sgl.systems.plan as plan

    assert plan.SearchConfig is parallel.PlanSearchConfig
    assert plan.SearchResult is parallel.PlanSearchResult
    for name in parallel.__all__:
        assert getattr(plan, name) is getattr(parallel, name)
    from sgl.systems.plan import PlanSearcher, SearchConfig, format_plan  # README's import
    assert PlanSearcher is parallel.PlanSearcher and SearchConfig is parallel.PlanSearchConfig
    assert format_plan is parallel.format_plan


@pytest.mark.parametrize("name", ["config_io", "cost", "dp", "model", "profiles", "search", "space"])
def test_plan_submodules_are_shims(name):
    old = importlib.import_module(f"sgl.systems.plan.{name}")
    for attr in old.__all__:
        assert hasattr(old, attr), attr
    if name != "search":
        new = importlib.import_module(f"sgl.systems.parallel.{name}")
        assert old.__all__ == new.__all__
        assert all(getattr(old, a) is getattr(new, a) for a in new.__all__)


def test_old_search_module_names():
    from sgl.systems.plan.search import SearchConfig, SearchResult, _exact_partition

    assert SearchConfig is parallel.PlanSearchConfig and SearchResult is parallel.PlanSearchResult
    assert _exact_partition is parallel.exact_partition


def test_executor_and_profiler_shims():
    from sgl.systems import executor, profiler

    assert executor.build_model is runtime.build_tiny_lm
    for name in executor.__all__:
        if name != "build_model":
            assert getattr(executor, name) is getattr(runtime, name), name
    assert executor._SavedBytes is runtime.SavedTensorBytes
    for name in ("profile_model", "profile_hardware", "profile_to_dir"):
        assert getattr(profiler, name) is getattr(runtime, name)


def test_systems_root_exposes_rooms():
    import sgl.systems

    assert sgl.systems.parallel is parallel and sgl.systems.runtime is runtime
    assert set(sgl.systems.__all__) == {"parallel", "plan", "runtime"}


def test_systems_imports_no_graph_code():
    import subprocess
    import sys

    code = ("import sys, sgl.systems, sgl.systems.runtime, sgl.systems.plan.search, sgl.systems.executor; "
            "print(sorted(m for m in sys.modules if m.startswith(('sgl.data', 'sgl.ops', 'sgl.models', "
            "'sgl.datasets', 'sgl.tasks', 'sgl.search', 'sgl.samplers', 'sgl.embeddings', 'sgl.cli'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
