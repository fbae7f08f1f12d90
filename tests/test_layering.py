"""The import graph of ``sgl``: no cycles, and no lower layer importing an upper one (DESIGN.md).

Every ``import`` statement counts, including those inside functions (a lazy import is still
a dependency). ``from pkg import name`` points at ``pkg.name`` when that is a module, else at
``pkg`` itself.
"""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "sgl"

LOWER = {"data", "ops", "device", "comm", "datasets", "errors", "fileio", "_checks"}
UPPER = {"models", "tasks", "search", "samplers", "embeddings", "analytics", "systems", "cli"}
#: what sgl.systems may use: the device and communication layers, nothing of the graph side
SYSTEMS_MAY_USE = {"systems", "device", "comm", "errors", "fileio", "_checks"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules():
    return {_module_name(p): p for p in ROOT.rglob("*.py")}


def _imports(name: str, path: Path, modules) -> set:
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target.startswith("sgl") and target != name:
                out.add(target)
    return out


def _graph():
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _top(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_the_walker_sees_lazy_and_relative_imports(tmp_path):
    graph = _graph()
    assert "sgl.errors" in graph["sgl.cli.main"]
    assert "sgl.tasks.run_config" in graph["sgl.tasks.run"]
    # a lazy import inside a function is an edge too
    assert any(t.startswith("sgl.datasets") for t in graph["sgl.tasks.run"])


def test_no_import_cycles():
    graph = _graph()
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []
    counter = [0]

    def visit(v):  # Tarjan's strongly connected components (iterative enough for this graph size)
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


@pytest.mark.parametrize("lower", sorted(LOWER))
def test_lower_layers_never_import_upper_ones(lower):
    bad = [(m, t) for m, targets in _graph().items() if _top(m) == lower for t in targets if _top(t) in UPPER]
    assert not bad, f"{lower} imports upper layers: {bad}"


def test_systems_never_imports_graph_code():
    bad = [(m, t) for m, targets in _graph().items() if _top(m) == "systems"
           for t in targets if _top(t) and _top(t) not in SYSTEMS_MAY_USE]
    assert not bad, f"sgl.systems imports graph code: {bad}"


def _imports_argparse(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import) and any(a.name == "argparse" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module == "argparse":
            return True
    return False


def test_only_the_cli_parses_arguments():
    offenders = [name for name, path in _modules().items() if _top(name) != "cli" and _imports_argparse(path)]
    assert not offenders, f"argparse outside sgl/cli: {offenders}"


def test_nothing_below_the_cli_imports_it():
    bad = [(m, t) for m, targets in _graph().items() if _top(m) not in ("cli", "") for t in targets
           if _top(t) == "cli"]
    assert not bad, f"library modules import sgl.cli: {bad}"


def test_no_module_is_too_large():
    big = {name: n for name, path in _modules().items() if (n := len(path.read_text().splitlines())) > 470}
    assert not big, f"modules over ~450 lines (split them, one concept per file): {big}"
