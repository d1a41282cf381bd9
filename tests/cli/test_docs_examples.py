"""The examples in README.md and docs/ run as written from the repository root: every `profctl ...` line parses
with the real command line parser (no renamed or removed option), every file it names is in the repository, and
the README's first commands, which need no GPU, run here and finish."""

from __future__ import annotations

import glob
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from profctl.cli import app
from tests.conftest import ROOT

#: docs/summary-schema.md is the schema's own document, kept by the readers' maintainers
DOCS = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "summary-schema.md")]
COMMANDS = dict(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
#: words that mark a synopsis (a form to fill in), not an example to run
SYNOPSIS = re.compile(r"\[|\.\.\.|<[a-z-]+>|\b(BASE|NEW|RUN|FILE|DIR|NAME|PATH|CMD)\b|\$|\|(?!\s*(tail|head|less))")


def examples() -> list[tuple[str, int, str]]:
    """(file, line, command) of every `profctl ...` example in code blocks, and in the README's backticks (its
    table of commands); elsewhere a backticked `profctl report` is a mention, not an example."""
    out = []
    for doc in DOCS:
        lines = doc.read_text(encoding="utf-8").splitlines()
        in_code = False
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.strip().startswith("```"):
                in_code = not in_code
                i += 1
                continue
            cands = []
            if in_code or line.startswith("    "):
                text, n = line, i
                while text.rstrip().endswith("\\") and i + 1 < len(lines):
                    i += 1
                    text = text.rstrip()[:-1] + " " + lines[i].strip()
                cands.append((n, text.strip()))
            elif doc.name == "README.md":
                cands += [(i, m) for m in re.findall(r"`(profctl [a-z]+ [^`]+)`", line)]
            for n, text in cands:
                text = re.sub(r"^\$ ", "", text)
                text = re.sub(r"^([A-Z_]+=\S+\s+)+", "", text)
                text = re.sub(r"\s+#.*$", "", text)
                text = re.sub(r"\s*\|\s*(tail|head|less)\b.*$", "", text)
                if re.match(r"profctl [a-z]+", text) and not SYNOPSIS.search(text):
                    out.append((doc.name, n + 1, text))
            i += 1
    return out


EXAMPLES = examples()


def test_the_docs_have_examples() -> None:
    assert len(EXAMPLES) > 30
    assert {d for d, _, _ in EXAMPLES} >= {"README.md", "reports.md", "recipes.md", "torch.md"}


@pytest.mark.parametrize(("doc", "line", "text"), EXAMPLES, ids=[f"{d}:{n}" for d, n, _ in EXAMPLES])
def test_example_parses_and_names_real_files(doc: str, line: int, text: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    args = shlex.split(text)[1:]
    command = args[0]
    assert command in COMMANDS, f"{doc}:{line}: no command {command!r}"
    try:
        COMMANDS[command].make_context(command, args[1:])
    except (SystemExit, Exception) as e:  # typer.Exit from a usage error, or click's own
        pytest.fail(f"{doc}:{line}: `{text}` does not parse: {capsys.readouterr().err.strip() or e!r}")
    assert "is now" not in capsys.readouterr().err, f"{doc}:{line}: `{text}` uses an old spelling"
    for a in args[1:]:
        if a.startswith("-") or "/" not in a or a.startswith(("http", "~")):
            continue
        if a.startswith(("tests/", "reports/examples", "docs/", "../", "benchmarks/", "scripts/")):
            assert glob.glob(str(ROOT / a)), f"{doc}:{line}: {a} is not in the repository"


FIRST_RUN = [line for d, _, line in EXAMPLES
             if d == "README.md" and ("--device cpu" in line or " report tests/" in line)]


def test_readme_first_run_works_here(tmp_path: Path) -> None:
    """The README's first commands, as a newcomer pastes them at the repository root (runs go to a temporary
    store; outputs to a temporary folder)."""
    assert len(FIRST_RUN) >= 3
    env = dict(os.environ, PYTHONPATH=str(ROOT), PROFCTL_REPORTS=str(tmp_path / "reports"))
    for text in FIRST_RUN:
        words = shlex.split(text)[1:]  # outputs (-o FILE, any .html) go to the temporary folder
        args = [str(tmp_path / a) if a.endswith(".html") or words[i - 1] in ("-o", "--output") else a
                for i, a in enumerate(words)]
        p = subprocess.run([sys.executable, "-m", "profctl", *args], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=300)
        assert p.returncode == 0, (text, p.stderr)
        assert "Traceback" not in p.stderr


@pytest.mark.parametrize("option", ["--limit", "--timeout"])
def test_readme_names_the_commands_that_take_limit_and_timeout(option: str) -> None:
    # issue 39 item 9: the README said --limit and --timeout were "spelled the same in every command"; bench,
    # compare and explain refused --limit and report --timeout. Its list is now each command that takes them
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    m = re.search(rf"`{option}(?: N)?` \(((?:`[a-z]+`(?:, )?)+):", text)
    assert m, f"the README lists no commands for {option}"
    listed = set(re.findall(r"`([a-z]+)`", m.group(1)))
    taking = {name for name, cmd in COMMANDS.items()
              if any(option in getattr(p, "opts", ()) for p in cmd.params)}
    assert listed == taking


def test_docs_say_how_many_noise_lines_bench_prints_one_by_one() -> None:
    from profctl.render.bench_view import NOISE_LINES

    words = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}
    text = " ".join((ROOT / "docs" / "bench.md").read_text(encoding="utf-8").split())
    assert f"when more than {words[NOISE_LINES]} points have timings that spread" in text
