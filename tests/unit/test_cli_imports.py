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
