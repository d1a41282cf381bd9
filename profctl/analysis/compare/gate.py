"""``--fail-if-slower``: the one gate for every kind of comparison (bench runs, kernel summaries, ``profctl bench
--ab``), and a case in a few words for its messages."""

from __future__ import annotations

from dataclasses import dataclass

from profctl.analysis.compare.rows import Comparison, RowResult
from profctl.errors import Regression


def regressions(cmp: Comparison, limit: float, *, strict: bool = False) -> list[RowResult]:
    """Rows that fail `--fail-if-slower limit` (:func:`gate`'s rule): slower beyond the limit, a case that
    stopped working, and with `strict` an inconclusive case whose estimate is beyond the limit. ``not judged``
    rows never fail."""
    out = []
    for r in cmp.rows:
        if r.verdict == "failed" or (r.verdict == "slower" and r.ratio is not None and r.ratio - 1.0 > limit) or \
                (strict and r.verdict == "inconclusive" and r.ratio is not None and r.ratio - 1.0 > limit):
            out.append(r)
    return out


@dataclass
class Gate:
    """What ``--fail-if-slower`` decided: the rows that fail it, and the inconclusive ones beyond the limit that
    pass only because ``--strict`` was not given."""

    limit: float
    strict: bool
    failing: list[RowResult]
    beyond: list[RowResult]

    @property
    def passed(self) -> bool:
        return not self.failing

    @property
    def exit_code(self) -> int:
        """0 when it passed, 1 (:class:`Regression`) when it failed."""
        return 0 if self.passed else Regression.exit_code

    def error(self) -> Regression | None:
        """The one-line error that fails the run (None when it passed)."""
        if not self.failing:
            return None
        first = self.failing[0]
        if first.verdict == "failed":
            what = f"{case_label(first)} {first.verdict}"
        else:
            what = f"{case_label(first)} {(first.change or 0.0) * 100:+.1f}%" + (
                f" (CI {first.ci_lo * 100 - 100:+.1f}%..{first.ci_hi * 100 - 100:+.1f}%)"
                if first.ci_lo is not None and first.ci_hi is not None else " (threshold only)")
            if first.verdict == "inconclusive":
                what += ", inconclusive (--strict)"
        more = f" and {len(self.failing) - 1} more" if len(self.failing) > 1 else ""
        return Regression(f"regression beyond --fail-if-slower {self.limit * 100:g}%: {what}{more}")

    def warning(self) -> str | None:
        """What passed only for want of --strict, as one warning line."""
        if not self.beyond or self.strict:
            return None
        return (f"{len(self.beyond)} inconclusive case(s) with an estimate beyond {self.limit * 100:g}% (e.g. "
                f"{case_label(self.beyond[0])}); --strict makes them fail")


def gate(cmp: Comparison, limit: float, *, strict: bool = False) -> Gate:
    """``--fail-if-slower limit``, the same for every kind of comparison (bench runs, nsys/torch/ncu summaries,
    ``profctl bench --ab``): it fails on a row that is ``slower`` (its interval above 1, its estimate past the
    threshold) by more than `limit`, or that stopped working; with `strict` also on an ``inconclusive`` row
    whose estimate is beyond `limit`. ``unchanged``, ``faster`` and ``not judged`` rows never fail. The failing
    rows come worst first (what stopped working, then the largest slowdown), so the one-line error names the worst."""
    beyond = [r for r in cmp.rows if r.verdict == "inconclusive" and r.ratio is not None and r.ratio - 1 > limit]
    failing = sorted(regressions(cmp, limit, strict=strict),
                     key=lambda r: (r.verdict != "failed", -(r.change or 0.0)))
    return Gate(limit=limit, strict=strict, failing=failing, beyond=beyond)


def case_label(r: RowResult) -> str:
    """The row's case in a few words: kernel [range], or name (backends) shape pass."""
    c = r.case
    if "kernel" in c:
        return f"{c['kernel']}" + (f" [{c['range']}]" if c.get("range") else "")
    b = c["name"]
    if c.get("backend_base") != c.get("backend_new"):
        b += f" ({c['backend_base']}->{c['backend_new']})"
    return f"{b} {c['shape']} {c['pass']}"
