"""Table building blocks every renderer shares: number formats, a rich table, Markdown, CSV, the console (full
width when the output is not a terminal, so a pipe or a file gets whole lines), long names elided in the middle
with the full name kept, and paths shown relative to where the reader stands.

Display rows are dicts of column -> text, with names whole (Markdown and CSV show them so). A key starting with
``_`` is not a column: ``_full`` maps a column to a longer form of its text (a kernel's demangled name), which the
HTML page puts in a tooltip and the terminal in the footnote of a name it had to elide.
"""

from __future__ import annotations

import csv
import io
import os
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMATS = ("table", "markdown", "csv", "json")
#: the columns that hold names long enough to elide (kernel names)
NAME_COLUMNS = ("kernel", "main kernel")
#: terminal width of a name column; longer names are elided in the middle and given a footnote
NAME_WIDTH = 48
#: columns whose text reads left to right (everything else that looks like a number is right-aligned)
_NUMBER = re.compile(r"^[-+]?[\d.,]+(e[-+]?\d+)?\s*(%|x|ms|us|ns|s|min|B|KB|MB|GB|MiB|GiB|MHz)?"
                     r"( \(!\)| FAIL| \(host\)| †)?$")


def fmt_ns(ns: float | None) -> str:
    if ns is None:
        return "-"
    if ns >= 1e9:
        return f"{ns / 1e9:.3f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} us"
    return f"{ns:.0f} ns"


def kernel_cell(name: str | None, short: str | None = None) -> tuple[str, str | None]:
    """(the name a table shows, the whole name for its tooltip/footnote): the base function name, whole (the
    renderer elides it to its column), and the demangled name with its template arguments when it differs."""
    if not name:
        return short or "-", None
    from profctl.kernels import display_name

    shown = display_name(name, width=10**6)
    return shown, (name if name != shown else None)


def elide(text: str, width: int = NAME_WIDTH) -> str:
    """`text` cut to `width` characters in the middle (``head…tail``): kernel names of one family share their
    start and differ in their template arguments and suffixes, so both ends stay."""
    if len(text) <= width:
        return text
    head = (width - 1) * 3 // 5
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


def columns(rows: list[dict[str, Any]]) -> list[str]:
    return [c for c in rows[0] if not c.startswith("_")] if rows else []


def numeric_columns(rows: list[dict[str, Any]]) -> set[str]:
    """Columns whose every value is a number or '-' (right-aligned)."""
    out = set()
    for c in columns(rows):
        vals = [str(r.get(c, "")).strip() for r in rows]
        if any(v not in ("-", "") for v in vals) and all(v in ("-", "") or _NUMBER.match(v) for v in vals):
            out.add(c)
    return out


def full_text(row: dict[str, Any], col: str) -> str:
    """The full text of a cell (the `_full` entry when the row carries one)."""
    return str((row.get("_full") or {}).get(col, row.get(col, "")))


def elide_rows(rows: list[dict[str, Any]], width: int = NAME_WIDTH) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows with long names elided in the middle and a footnote mark; the footnotes ('[n] full name'), one per
    distinct full name."""
    notes: dict[str, int] = {}
    fulls: dict[tuple[str, str], set[str]] = {}
    for r in rows:
        for c in NAME_COLUMNS:
            if c in r:
                fulls.setdefault((c, str(r[c])), set()).add(full_text(r, c))
    out = []
    for r in rows:
        r2 = dict(r)
        for c in NAME_COLUMNS:
            if c not in r:
                continue
            # a long name, or one that reads like another row's name but is another kernel (three
            # `elementwise_kernel` rows of different templates): its whole name in a footnote
            if len(str(r[c])) > width or len(fulls[(c, str(r[c]))]) > 1:
                n = notes.setdefault(full_text(r, c), len(notes) + 1)
                r2[c] = f"{elide(str(r[c]), width - len(str(n)) - 3)} [{n}]"
        out.append(r2)
    return out, [f"[{n}] {name}" for name, n in notes.items()]


#: columns a narrow terminal leaves out first, in this order (then from the right; never the first column nor a
#: name): what is said elsewhere (tool, an empty range), spreads beside their median, rates beside their times
LOW_VALUE = ("tool", "range", "domain", "style", "noise floor", "SM MHz", "of roof", "% peak", "base TFLOP/s",
             "new TFLOP/s", "TFLOP/s change", "command", "duration", "label", "points", "min", "max", "med", "class",
             "GPU ops", "peak mem", "case", "pass", "TFLOP/s", "CI", "kind", "time from")
#: columns whose cells stay on one line up to WORD_MAX characters, words and all (an attention shape read in
#: pieces down a column is no longer read as one)
WHOLE_COLUMNS = ("shape",)
#: a cell this short stays on one line (a date, a GPU's name, a status)
SHORT = 20
#: the longest word kept whole (a longer one, a path, may fold)
WORD_MAX = 40
#: the narrowest a name column is elided to before other columns are left out
NAME_MIN = 28


@dataclass(frozen=True)
class Fit:
    """How a table's columns fit a terminal `width` columns wide: the columns kept with their widths (None: as
    wide as their text; no fitting was needed), those left out, and the width long names are elided to."""

    width: int | None = None
    widths: dict[str, int | None] = field(default_factory=dict)
    dropped: tuple[str, ...] = ()
    name_width: int = NAME_WIDTH

    def note(self) -> str | None:
        """The line said under a table that left columns out."""
        if not self.dropped:
            return None
        return (f"(not shown in {self.width} columns: {', '.join(self.dropped)}; a wider terminal or -f markdown "
                "shows them)")

    def note_lines(self) -> list[str]:
        """note() as the lines said under the table, two spaces in, each within the terminal's width (wrapped at
        words, never cut)."""
        if not self.dropped:
            return []
        glued = Fit(self.width, self.widths, tuple(c.replace(" ", "\u00a0") for c in self.dropped))  # a name whole
        lines = textwrap.wrap(str(glued.note()), width=max(20, self.width or 10**6), break_long_words=False,
                              break_on_hyphens=False, initial_indent="  ", subsequent_indent="   ")
        return [ln.replace("\u00a0", " ") for ln in lines]


def _cells(rows: list[dict[str, Any]], c: str) -> list[str]:
    return [str(r.get(c, "")) for r in rows]


def _whole(cell: str) -> bool:
    """A cell that never wraps: a number (with its unit), one word, a short text."""
    return len(cell) <= SHORT or not any(ch.isspace() for ch in cell) or bool(_NUMBER.match(cell.strip()))


def _lines_width(cell: str, lines: int) -> int:
    """The narrowest width that lays `cell` on `lines` lines, wrapped at words (WORD_MAX at most)."""
    w = max([len(x) for x in cell.split()] or [1])
    while w < min(len(cell), WORD_MAX) and len(textwrap.wrap(cell, w, break_long_words=False)) > lines:
        w += 1
    return min(w, WORD_MAX)


def _min_width(rows: list[dict[str, Any]], c: str, lines: int = 0) -> int:
    """The narrowest column `c` can be: a number never wraps or is cut, nor does a word of the header or a cell
    (up to WORD_MAX), nor a short cell; a cell of WHOLE_COLUMNS on at most `lines` lines (0: as any text)."""
    need = [len(w) for w in c.split()] or [1]
    if c in WHOLE_COLUMNS and lines:
        need += [_lines_width(cell, lines) for cell in _cells(rows, c)]
    for cell in _cells(rows, c):
        if _NUMBER.match(cell.strip()):
            need.append(len(cell))
        elif _whole(cell):
            need.append(min(len(cell), WORD_MAX))
        else:
            need += [min(len(w), WORD_MAX) for w in cell.split()]
    return max(need)


def fit_columns(rows: list[dict[str, Any]], width: int | None, drop: tuple[str, ...] = LOW_VALUE) -> Fit:
    """Which columns of `rows` a terminal `width` columns wide shows, and how wide each is, so that numbers never
    wrap or are cut and words are not split: long names are elided (down to NAME_MIN), then columns are left out,
    empty ones first, then those in `drop`, then from the right (never the first column or a name), and the room
    left goes to names and text; a shape stays on one line, or two, where that leaves out no more columns (but
    empty and low-value ones) than letting it wrap would. None for `width`: no fitting (a pipe or a file gets
    whole lines)."""
    if width is None or not rows:
        return Fit()
    if not any(c in WHOLE_COLUMNS for c in columns(rows)):
        return _fit(rows, width, drop, 0)
    fits = [_fit(rows, width, drop, lines) for lines in (1, 2, 0)]
    cheap = set(_empty(rows)) | set(drop)  # leaving out an empty or a low-value column costs little
    return next(f for f in fits if set(f.dropped) - cheap <= set(fits[-1].dropped))


def _empty(rows: list[dict[str, Any]]) -> list[str]:
    return [c for c in columns(rows) if all(x.strip() in ("", "-") for x in _cells(rows, c))]


def _fit(rows: list[dict[str, Any]], width: int, drop: tuple[str, ...], lines: int) -> Fit:
    cols = columns(rows)
    names = [c for c in cols if c in NAME_COLUMNS]
    elided, _ = elide_rows(rows)
    natural = {c: max([len(c), *(len(x) for x in _cells(elided, c))]) for c in cols}
    least = {c: min(natural[c], NAME_MIN) if c in names else _min_width(rows, c, lines) for c in cols}

    def need(keep: list[str], sizes: dict[str, int]) -> int:  # rich's heavy box: a bar and a space each side
        return sum(sizes[c] for c in keep) + 3 * len(keep) + 1

    if need(cols, natural) <= width:
        return Fit(width=width, widths=dict.fromkeys(cols))
    empty = _empty(rows)
    named = [c for c in names if c not in empty]  # a name column with no name in it goes first, as empty ones do
    rest = [c for c in reversed(cols) if c not in drop]
    key = None if named else cols[0]  # the row's name: its kernel, else the first column (a run, a range)
    order = [c for c in dict.fromkeys([*empty, *[d for d in drop if d in cols], *rest])
             if c != key and c not in named]
    keep, gone = list(cols), []
    while need(keep, least) > width and order:
        gone.append(order.pop(0))
        keep.remove(gone[-1])
    for c in reversed(gone):  # a narrow column left out before a wide one may fit again
        if need([*keep, c], least) <= width:
            keep = [k for k in cols if k in keep or k == c]
    sizes = {c: least[c] for c in keep}
    slack = width - need(keep, sizes)
    for c in names:  # names first get their room back, then text columns share what is left
        if c in sizes:
            more = max(0, min(slack, natural[c] - sizes[c]))
            sizes[c] += more
            slack -= more
    growing = [c for c in keep if sizes[c] < natural[c]]
    while slack > 0 and growing:
        for c in list(growing):
            if slack <= 0:
                break
            sizes[c] += 1
            slack -= 1
            if sizes[c] >= natural[c]:
                growing.remove(c)
    name_width = min((sizes[c] for c in names if c in sizes), default=NAME_WIDTH)
    return Fit(width=width, widths=dict(sizes), dropped=tuple(c for c in cols if c not in keep),
               name_width=name_width)


def rich_table(title: str, rows: list[dict[str, Any]], fit: Fit | None = None) -> Any:
    """A rich table of `rows`; with `fit` (fit_columns), only the columns it keeps, at its widths, and a caption
    naming those left out."""
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=escape(title), show_lines=False, header_style="bold")
    if not rows:
        t.add_column("(none)")
        return t
    nums = numeric_columns(rows)
    cols = [c for c in columns(rows) if fit is None or not fit.widths or c in fit.widths]
    for c in cols:
        w = fit.widths.get(c) if fit is not None else None
        t.add_column(c, justify="right" if c in nums else "left", overflow="fold", width=w,
                     no_wrap=c in NAME_COLUMNS)
    for r in rows:
        t.add_row(*[escape(str(r.get(c, ""))) for c in cols])
    return t


def terminal_width(con: Any) -> int | None:
    """The width a table must fit on `con`: a terminal's; None for a pipe or a file (whole lines there)."""
    if not getattr(con, "is_terminal", False) or isinstance(con, _wide_console()):
        return None
    return int(con.width)


def print_table(con: Any, title: str, rows: list[dict[str, Any]], *, more: int = 0) -> None:
    """A rich table fitted to the terminal (fit_columns: columns left out are said under it), long names elided
    and their full names as footnotes under it; `more` rows left out (by --limit) are said under it too."""
    from rich.markup import escape

    fit = fit_columns(rows, terminal_width(con))
    shown, notes = elide_rows(rows, fit.name_width)
    con.print(rich_table(title, shown, fit))
    for line in fit.note_lines():
        con.print(escape(line), soft_wrap=True, style="dim")
    for n in notes:
        con.print(escape(f"  {n}"), soft_wrap=True, style="dim")
    if more > 0:
        con.print(f"  ({more} more row(s) not shown; --limit 0 shows all)", style="dim")


def markdown(rows: list[dict[str, Any]], *, more: int = 0) -> str:
    if not rows:
        return "_(none)_\n"
    cols = columns(rows)
    out = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(r.get(c, "")).replace("|", "\\|") for c in cols) + " |")
    if more > 0:
        out += ["", f"_{more} more row(s) not shown; --limit 0 shows all_"]
    return "\n".join(out) + "\n"


def to_csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    if rows:
        w = csv.DictWriter(buf, fieldnames=columns(rows), extrasaction="ignore")
        w.writeheader()
        w.writerows({c: r.get(c, "") for c in columns(rows)} for r in rows)
    return buf.getvalue()


def limited(rows: list[dict[str, Any]], limit: int | None) -> tuple[list[dict[str, Any]], int]:
    """(the first `limit` rows, how many were left out); all of them for limit None or 0."""
    if not limit or len(rows) <= limit:
        return rows, 0
    return rows[:limit], len(rows) - limit


def console(width: int = 200, *, stderr: bool = False) -> Any:
    """A rich Console: the terminal's width on a terminal; in a pipe or a file at least `width` columns, and as
    many as a table needs to keep each of its rows on one line."""
    from rich.console import Console

    con = Console(stderr=stderr)
    return con if con.is_terminal else _wide_console()(width=width, stderr=stderr)


def fitted_console(width: int = 120) -> tuple[Any, io.StringIO]:
    """A plain-text Console into a buffer that wraps table cells to `width` columns (for views whose cells hold
    sentences: a file or a pipe gets lines a terminal can show)."""
    from rich.console import Console

    buf = io.StringIO()
    return Console(file=buf, width=width, color_system=None, force_terminal=False, soft_wrap=False), buf


def console_fitted(width: int = 120) -> Any:
    """The terminal's Console on a terminal; in a pipe, a plain Console `width` columns wide that wraps cells."""
    from rich.console import Console

    con = Console()
    return con if con.is_terminal else Console(width=width, color_system=None, soft_wrap=False)


def text_console(width: int = 240) -> tuple[Any, io.StringIO]:
    """A rich Console that writes plain text (no colour, at least `width` columns, wider for a table that needs
    it) into a buffer: a terminal table for a file (`-f table -o FILE`)."""
    buf = io.StringIO()
    con = _wide_console()(file=buf, width=width, color_system=None, force_terminal=False, soft_wrap=False)
    return con, buf


_WIDE: Any = None


def _wide_console() -> Any:
    """The Console class for pipes and files (made once, on first use: rich loads only when a table is printed)."""
    global _WIDE
    if _WIDE is None:
        from rich.console import Console
        from rich.table import Table

        class WideConsole(Console):
            """Prints a table wider than the console at the table's own width (one row per line, nothing wrapped
            mid-word: a pipe or a file has no screen edge), and text lines whole."""

            def print(self, *objects: Any, **kw: Any) -> None:
                wide = self.options.update_width(10_000)
                need = max((self.measure(o, options=wide).maximum for o in objects if isinstance(o, Table)),
                           default=0)
                kw.setdefault("soft_wrap", not any(isinstance(o, Table) for o in objects))
                if need <= self.width:
                    super().print(*objects, **kw)
                    return
                old = self.width
                self.width = need
                try:
                    super().print(*objects, **kw)
                finally:
                    self.width = old

        _WIDE = WideConsole
    return _WIDE


_RUN_DIR = re.compile(r"^\d{8}T\d{6}Z-[A-Za-z0-9_.-]+-[0-9a-f]{6}$")


def display_path(p: str | Path | None, *, cwd: Path | None = None) -> str:
    """A path as a reader of this output can use it: relative to the current directory when it lies under it;
    else, for a file in a run directory (maybe of another machine), ``<run-id>/<file>``; else its name. Never the
    absolute path of the machine a summary was made on."""
    if p is None or str(p) == "":
        return "-"
    path = Path(str(p))
    if not path.is_absolute():
        return str(path)
    try:
        here = (cwd or Path.cwd()).resolve()
        real = path.resolve() if path.exists() else path
    except OSError:
        return _run_relative(path)
    if real.is_relative_to(here):
        return os.path.relpath(real, here)
    return _run_relative(path)


def _run_relative(path: Path) -> str:
    for i in range(len(path.parts) - 2, 0, -1):
        if _RUN_DIR.match(path.parts[i]):
            return str(Path(*path.parts[i:]))
    return path.name
