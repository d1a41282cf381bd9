"""The layout holds: layers import only downwards, no import circles between folders nor loops between modules,
no module takes another's private names, one file name per module, readers never run tools, pipelines never print,
the workloads depend only on profctl's foundations, no function grows past ~80 lines, and `profctl --help`
imports neither torch nor pandas. docs/architecture.md draws the same picture."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: lowest first; a unit may import units of its own layer or below (never above)
LAYERS: list[set[str]] = [
    {"profctl._version", "profctl.errors", "profctl.fsutil", "profctl.shapes", "profctl.spec", "profctl.nvtx",
     "profctl.kernels", "profctl.flops", "profctl.devices", "profctl.schema", "profctl.faults", "profctl.roofs",
     "profctl.head_dims", "profctl.memory", "profctl.model_spec"},
    {"profctl.proc", "profctl.nvml", "profctl.run_store", "profctl.recipes", "profctl.machine_state",
     "profctl.predictions"},
    {"profctl.tools", "profctl.readers"},
    {"profctl.inputs", "profctl.analysis"},
    {"profctl.pipelines", "profctl.render"},
    {"profctl.cli", "profctl", "profctl.__main__", "profctl.mcp_server", "profctl.mcp_answers", "profctl.api"},
]
#: (importer, imported) pairs forbidden even within the order above
FORBIDDEN = {("profctl.readers", "profctl.tools"), ("profctl.pipelines", "profctl.render"),
             ("profctl.pipelines", "profctl.cli"), ("profctl.analysis", "profctl.render")}
#: what the workload processes may import from profctl (they run in a child, with torch, without the rest)
WORKLOADS_MAY_IMPORT = {"profctl.spec", "profctl.model_spec", "profctl.nvtx", "profctl.shapes", "profctl.errors",
                        "profctl._version", "profctl.flops", "profctl.faults", "profctl.memory"}
#: the workload programs: the repository's workloads/ folder, shipped as this package (pyproject's package-dir)
WORKLOADS = "profctl.workloads"
MAX_FUNCTION_LINES = 80


def is_workload(module: str) -> bool:
    return module == WORKLOADS or module.startswith(WORKLOADS + ".")


def unit(module: str) -> str:
    """profctl.readers.nsys_sqlite -> profctl.readers; profctl.spec -> profctl.spec; profctl.workloads.x ->
    profctl.workloads.x (each workload module is a unit of its own, outside the layers)."""
    if is_workload(module):
        return module
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else parts[0]


def modules() -> dict[str, Path]:
    out = {}
    for folder, pkg in (("profctl", "profctl"), ("workloads", WORKLOADS)):
        for p in (ROOT / folder).rglob("*.py"):
            rel = p.relative_to(ROOT / folder).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            out[".".join((pkg, *parts))] = p
    return out


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Every module `path` imports, lazily or not, resolved against the project's modules."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    pkg = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(pkg[: len(pkg) - node.level + 1] + ([node.module] if node.module else [])) \
                if node.level else (node.module or "")
            for a in node.names:
                sub = f"{base}.{a.name}"
                found.add(sub if sub in known else base)
    return {m for m in found if m.split(".")[0] in ("profctl", "workloads")}


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports(name, path, set(mods)) for name, path in mods.items()}


def layer_of(u: str) -> int:
    for i, units in enumerate(LAYERS):
        if u in units:
            return i
    raise AssertionError(f"{u} is in no layer: add it to LAYERS and docs/architecture.md")


def test_every_profctl_unit_has_a_layer(graph: dict[str, set[str]]) -> None:
    for name in graph:
        if name.startswith("profctl") and not is_workload(name):
            layer_of(unit(name))


def test_imports_only_go_down(graph: dict[str, set[str]]) -> None:
    bad = []
    for name, deps in graph.items():
        if not name.startswith("profctl") or is_workload(name):
            continue
        src = unit(name)
        for d in deps:
            dst = unit(d)
            if dst == src or not dst.startswith("profctl") or is_workload(dst):
                continue
            if layer_of(dst) > layer_of(src) or (src, dst) in FORBIDDEN:
                bad.append(f"{name} imports {d}")
    assert not bad, "\n".join(sorted(bad))


def test_workloads_use_only_profctl_foundations(graph: dict[str, set[str]]) -> None:
    bad = [f"{n} imports {d}" for n, deps in graph.items() if is_workload(n)
           for d in deps if d.startswith("profctl") and not is_workload(d) and d not in WORKLOADS_MAY_IMPORT]
    assert not bad, "\n".join(sorted(bad))


def test_nothing_imports_workloads_by_its_old_top_level_name(graph: dict[str, set[str]]) -> None:
    """The wheel has no top-level `workloads` package (it ships as profctl.workloads)."""
    bad = [f"{n} imports {d}" for n, deps in graph.items() for d in deps if d.split(".")[0] == "workloads"]
    assert not bad, "\n".join(sorted(bad))


def test_no_import_circles(graph: dict[str, set[str]]) -> None:
    """Between folders and top-level modules (lazy imports count: a circle hidden in a function is still one)."""
    edges: dict[str, set[str]] = {}
    for name, deps in graph.items():
        src = unit(name)
        for d in deps:
            dst = unit(d)
            if dst != src and dst != "profctl":
                edges.setdefault(src, set()).add(dst)

    def reaches(a: str, b: str) -> bool:
        seen, todo = set(), [a]
        while todo:
            x = todo.pop()
            if x == b:
                return True
            if x not in seen:
                seen.add(x)
                todo += edges.get(x, ())
        return False

    circles = sorted({tuple(sorted((a, b))) for a, bs in edges.items() for b in bs if reaches(b, a)})
    assert not circles, circles


def test_every_profctl_import_names_a_module(graph: dict[str, set[str]]) -> None:
    """An import of profctl that names no module (a module moved or renamed, its lazy importers left behind) is
    found here, before a user reaches the function that holds it (mypy, told to ignore missing imports, is not
    told of it)."""
    bad = [f"{n} imports {d}" for n, deps in graph.items() for d in deps
           if d.split(".")[0] == "profctl" and d not in graph]
    assert not bad, "\n".join(sorted(bad))


def test_no_import_loops_between_modules(graph: dict[str, set[str]]) -> None:
    """Inside a folder too: no module imports, through any chain of imports (lazy ones and those for type checking
    included), a module that imports it back. A loop means two modules that are one idea split in two, or one
    that should be below the other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    loops: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in graph or w == v:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                loops.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not loops, loops


def test_no_module_imports_another_modules_private_names() -> None:
    """A module's `_name` is its own: what a neighbour needs is public (a private *module* beside a reader, such as
    readers/_ncu_load.py, is fine: its public names are what the others use)."""
    mods = modules()
    bad = []
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                pkg = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                base = ".".join(pkg[: len(pkg) - node.level + 1] + ([node.module] if node.module else [])) \
                    if node.level else (node.module or "")
                bad += [f"{name}: from {base} import {a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__") and f"{base}.{a.name}" not in mods]
    assert not bad, "\n".join(bad)


def test_one_module_name_per_idea() -> None:
    """No two modules share a file name (the layer shows in the name: commands ``*_cmd``, views ``*_view``,
    pipelines ``*_pipeline``; docs/architecture.md), so no import needs an alias to tell them apart."""
    seen: dict[str, list[str]] = {}
    for name, path in modules().items():
        if path.name != "__init__.py":
            seen.setdefault(path.stem, []).append(name)
    twice = {stem: names for stem, names in seen.items() if len(names) > 1}
    assert not twice, twice


def test_no_function_is_too_long_to_hold_in_the_head() -> None:
    long = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{name}.{node.name}: {n} lines")
    assert not long, long


def test_help_imports_neither_torch_nor_pandas() -> None:
    code = ("import sys; from typer.testing import CliRunner; from profctl.cli import app; "
            "r = CliRunner().invoke(app, ['--help']); assert r.exit_code == 0, r.output; "
            "print(sorted(m for m in ('torch', 'pandas', 'numpy', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
