"""The command modules import light modules at the top and heavy ones where they are used: the standard
library, typer, profctl.errors, profctl.fsutil and profctl.render.tables at module level (`profctl --help` loads them
anyway, or nearly), and the rest of profctl (spec and shapes included) and other third-party libraries inside the
function that needs them, so `--help` and a refused option stay fast."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from tests.conftest import ROOT

CLI = ROOT / "profctl" / "cli"
#: profctl's modules light enough for the top of a command module (about a millisecond each: render.tables needs
#: only rich, which typer's --help loads anyway; spec and shapes take ~8 ms to import, so they stay lazy for
#: `--help`'s sake)
LIGHT_PROFCTL = {"profctl", "profctl._version", "profctl.errors", "profctl.fsutil", "profctl.render.tables"}


def _resolve(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    out = []
    for a in node.names:
        sub = f"{base}.{a.name}"
        path = ROOT.joinpath(*sub.split("."))
        out.append(sub if path.with_suffix(".py").exists() or path.is_dir() else base)
    return out


def _is_light(module: str) -> bool:
    top = module.split(".")[0]
    return (top in sys.stdlib_module_names or top in ("__future__", "typer") or module in LIGHT_PROFCTL
            or module.startswith("profctl.cli"))


def _imports(path: Path) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(module-level imports outside `if TYPE_CHECKING:`, imports inside functions) of `path`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = [(n.lineno, m) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)) for m in _resolve(n)]
    inner = {(n.lineno, m) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
             for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom)) for m in _resolve(n)}
    return top, sorted(inner)


def test_command_modules_import_only_light_modules_at_the_top() -> None:
    heavy = [f"{p.name}:{line} {m}" for p in sorted(CLI.glob("*.py")) for line, m in _imports(p)[0]
             if not _is_light(m)]
    assert not heavy, heavy


def test_command_modules_import_light_modules_at_the_top_not_in_functions() -> None:
    lazy_light = [f"{p.name}:{line} {m}" for p in sorted(CLI.glob("*.py")) for line, m in _imports(p)[1]
                  if _is_light(m)]
    assert not lazy_light, lazy_light


#: the modules still importing through cli/_common (files of other work in progress); nothing new joins them
THROUGH_COMMON = {"compare_cmd.py"}


def test_commands_import_from_the_modules_of_one_idea_not_through_common() -> None:
    """cli/_common re-exported seven modules "by their old import path" (issue 48.3): their importers name the real
    module, and what is left in _common is only what the modules in THROUGH_COMMON still take from it."""
    through = sorted(str(p.relative_to(ROOT)) for d in ("profctl", "tests", "benchmarks", "workloads")
                     for p in (ROOT / d).rglob("*.py")
                     if p.name != "_common.py" and any(m == "profctl.cli._common" for _, m in _all_imports(p)))
    assert {Path(p).name for p in through} <= THROUGH_COMMON, through
    common = ast.parse((CLI / "_common.py").read_text(encoding="utf-8"))
    names = {a.asname or a.name for n in common.body if isinstance(n, ast.ImportFrom) for a in n.names} - {
        "annotations"}
    used = {a.asname or a.name for f in THROUGH_COMMON if (CLI / f).exists()
            for n in ast.parse((CLI / f).read_text(encoding="utf-8")).body
            if isinstance(n, ast.ImportFrom) and n.module == "profctl.cli._common" for a in n.names}
    assert names <= used, sorted(names - used)


def _all_imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(n.lineno, n.module or "") for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)] + [
        (n.lineno, a.name) for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]


#: modules whose light imports sat inside functions (issue 48.3): none of these is heavy to import, so each sits at
#: the top of its module (docs/architecture.md, "Imports sit at the top of their module")
HOISTED = {"profctl/render/source_view.py": {"re"}, "profctl/render/recipes_view.py": {"profctl.render.tables"},
           "profctl/render/backend_table_view.py": {"profctl.render.html"}, "profctl/machine_state.py": {"profctl"},
           "profctl/run_store.py": {"importlib.util", "profctl.nvml"},
           "profctl/pipelines/ncu_pipeline.py": {"importlib", "profctl", "profctl.analysis.select",
                                                 "profctl.readers.ncu_profiles", "profctl.analysis.diagnose"}}


def test_light_imports_sit_at_the_top() -> None:
    inside = []
    for rel, mods in HOISTED.items():
        tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
        inside += [f"{rel}:{n.lineno} {m}" for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
                   for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))
                   for m in ([a.name for a in n.names] if isinstance(n, ast.Import) else [n.module or ""])
                   if m in mods]
    assert not inside, inside
