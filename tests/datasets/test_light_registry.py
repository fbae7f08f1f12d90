"""The registry lists datasets without torch (issue 26 item 9) and every old import still works."""
import subprocess
import sys

import pytest

import sgl.datasets
from sgl.datasets import registry
from sgl.errors import ConfigError

HEAVY = ("torch", "torch_geometric", "numpy", "scipy", "pandas")


def _modules_after(code: str) -> set:
    probe = f"import sys\n{code}\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(out.stdout.split()) if out.stdout.strip() else set()


def test_sgl_datasets_list_imports_no_torch():
    loaded = _modules_after("from sgl.cli.main import main\nassert main(['datasets', 'list']) == 0")
    assert not loaded & {"torch", "torch_geometric"}, loaded


def test_registry_queries_import_no_torch():
    loaded = _modules_after("import sgl.datasets as d\nassert ('cora', 'node') in [(n, t) for n, _, t in "
                            "d.list_datasets()]\nassert d.dataset_task('criteo') == 'ctr'")
    assert not loaded, loaded


@pytest.mark.parametrize("name", sgl.datasets.__all__)
def test_every_public_name_still_imports(name):
    assert getattr(sgl.datasets, name) is not None
    assert name in dir(sgl.datasets)


def test_submodules_and_from_imports_still_work():
    from sgl.datasets import GraphDataset, ctr, load_planetoid, tu
    import sgl.datasets.edges

    assert isinstance(GraphDataset, type) and callable(load_planetoid) and callable(tu.read_tu)
    assert callable(sgl.datasets.edges.edges_to_csr) and ctr.load_criteo is sgl.datasets.ctr.load_criteo
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        sgl.datasets.no_such_name  # noqa: B018


def test_every_builtin_entry_resolves_to_its_loader():
    for key, entry in registry._REGISTRY.items():
        assert callable(entry.resolve()), key


def test_lazy_registration_rules():
    with pytest.raises(ConfigError, match="package.module:function"):
        registry.register_lazy("bad-target", "no_colon_here", "x")
    with pytest.raises(ConfigError, match="reserved"):
        registry.register_lazy("file:mine", "sgl.datasets.karate:load_karate", "x")
    registry.register_lazy("broken-lazy", "sgl.datasets.karate:no_such_loader", "x", overwrite=True)
    try:
        with pytest.raises(AttributeError):
            sgl.datasets.load("broken-lazy")
    finally:
        del registry._REGISTRY["broken-lazy"]
