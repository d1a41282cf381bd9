"""The Python API beyond profiling (``profctl.explain``, ``compare``, ``ab``, ``proton``, ``timeline``) and what
every call returns in a notebook: typed results whose ``.to_dict()`` is the command's ``-f json``, pandas frames,
and a rich display (``_repr_html_``, ``_repr_markdown_``: profctl.render.notebook_view). ``profctl/__init__.py``
imports this module on first use, so ``import profctl`` and ``profctl --help`` stay light."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profctl.errors import UsageError
from profctl.pipelines.bench_pipeline import BenchResult
from profctl.render import notebook_view
from profctl.schema import Summary

if TYPE_CHECKING:
    import pandas as pd

    from profctl.analysis.compare.rows import Comparison


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame(rows)


@dataclass(frozen=True)
class EvidenceItem:
    """One piece of a cause's evidence: the sentence, and as data where the detector gave it the metric (ncu's
    name where there is one), its value and unit, and what it was judged by (a threshold and how it compares)."""

    sentence: str
    metric: str | None = None
    value: float | None = None
    unit: str | None = None
    threshold: float | None = None
    judged: str | None = None


@dataclass(frozen=True)
class CauseItem:
    """One cause of A's time (or of its gap to B): what fixing it saves, the time after the fix, where, the fix,
    the evidence."""

    id: str
    title: str
    saving_us: float
    fixed_us: float | None
    lines: list[tuple[str, int]]
    fix: str
    evidence: list[EvidenceItem]

    @classmethod
    def from_dict(cls, c: dict[str, Any]) -> CauseItem:
        items = c.get("evidence_items") or [{"sentence": s} for s in c.get("evidence") or []]
        return cls(id=c["id"], title=c.get("title") or "", saving_us=float(c.get("saving_us") or 0.0),
                   fixed_us=c.get("fixed_us"), lines=[(x["file"], int(x["line"])) for x in c.get("lines") or []],
                   fix=c.get("fix") or "",
                   evidence=[EvidenceItem(**{f.name: it.get(f.name) for f in fields(EvidenceItem)}) for it in items])


class ExplainResult:
    """``profctl.explain``: why kernel A is slow, or slower than B. ``.verdict``, ``.causes`` (CauseItem, ranked by
    saving), ``.floor`` (per kernel, per unit), ``.to_dict()`` (``profctl explain -f json``), ``.causes_df()``,
    ``.evidence_df()``, ``.floor_df()``, ``.lines_df()``, ``.rows_df()`` (A and B side by side); ``.explanation``
    is profctl.analysis.explanation.Explanation itself."""

    def __init__(self, explanation: Any) -> None:
        from profctl.render import explanation_view

        self.explanation = explanation
        self._doc: dict[str, Any] = json.loads(explanation_view.to_json(explanation))

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(self._doc))

    def to_json(self) -> str:
        from profctl.render import explanation_view

        return explanation_view.to_json(self.explanation)

    @property
    def verdict(self) -> str | None:
        return self._doc.get("verdict")

    @property
    def headline(self) -> str:
        return str(self._doc.get("headline") or "")

    @property
    def gap_us(self) -> float | None:
        return self._doc.get("gap_us")

    @property
    def causes(self) -> list[CauseItem]:
        return [CauseItem.from_dict(c) for c in self._doc.get("causes") or []]

    @property
    def floor(self) -> dict[str, Any]:
        return dict(self._doc.get("floor") or {})

    def causes_df(self) -> pd.DataFrame:
        """One row per cause: rank, id, title, saving_us, fixed_us, where, fix, the evidence joined."""
        return _frame([{"rank": i, "id": c.id, "title": c.title, "saving_us": c.saving_us, "fixed_us": c.fixed_us,
                        "where": ", ".join(f"{Path(f).name}:{n}" for f, n in c.lines), "fix": c.fix,
                        "evidence": "; ".join(e.sentence for e in c.evidence)}
                       for i, c in enumerate(self.causes, 1)])

    def evidence_df(self) -> pd.DataFrame:
        """One row per evidence item of every cause: cause, sentence, metric, value, unit, threshold, judged."""
        return _frame([{"cause": c.id, **e.__dict__} for c in self.causes for e in c.evidence])

    def floor_df(self) -> pd.DataFrame:
        return _frame(notebook_view.floor_rows(self._doc))

    def lines_df(self, top: int = 10) -> pd.DataFrame:
        return _frame(notebook_view.line_rows(self._doc, top))

    def rows_df(self) -> pd.DataFrame:
        return _frame(list(self._doc.get("rows") or []))

    def to_dataframe(self) -> pd.DataFrame:
        return self.causes_df()

    def _repr_html_(self) -> str:
        return notebook_view.explanation_html(self._doc)

    def _repr_markdown_(self) -> str:
        from profctl.render import explanation_view

        return explanation_view.to_markdown(self.explanation)

    def __repr__(self) -> str:
        return f"<profctl ExplainResult: {self.verdict or self.headline}>"


class CompareResult:
    """``profctl.compare``: per case the change with its interval and verdict. ``.to_dict()`` is ``profctl
    compare -f json``; ``.to_dataframe()`` one row per case; ``.counts``; ``.gate(limit)`` the --fail-if-slower
    verdict; ``.comparison`` is profctl.analysis.compare.rows.Comparison itself."""

    def __init__(self, comparison: Comparison, notes: list[str] | None = None) -> None:
        self.comparison = comparison
        self.notes = notes or []

    def to_dict(self) -> dict[str, Any]:
        from profctl.render import compare_view

        return json.loads(compare_view.to_json(self.comparison))

    def to_dataframe(self) -> pd.DataFrame:
        return _frame([r.to_dict() for r in self.comparison.rows])

    @property
    def counts(self) -> dict[str, int]:
        return dict(self.comparison.counts())

    def gate(self, limit: float | str, *, strict: bool = False) -> Any:
        """``--fail-if-slower limit`` (a fraction, or text as the option takes it: ``"5%"``, ``"2x"``): its
        verdict, whose ``.error()`` is the Regression the command exits 1 with (None when it passed)."""
        from profctl.analysis.compare.gate import gate

        return gate(self.comparison, _limit(limit), strict=strict)

    def _repr_html_(self) -> str:
        from profctl.render import compare_view

        cmp = self.comparison
        return notebook_view.comparison_html(compare_view.header_lines(cmp), compare_view.display_rows(cmp),
                                             compare_view.footer_lines(cmp) + self.notes)

    def _repr_markdown_(self) -> str:
        from profctl.render import compare_view

        return compare_view.to_markdown(self.comparison)


class AbCompareResult(CompareResult):
    """``profctl.ab``: B against A, interleaved round by round. ``.to_dict()`` is ``profctl bench --ab ... -f
    json`` (a, b, result, cases); ``.answers`` the one line per case; ``.result`` the pipeline's AbResult."""

    def __init__(self, result: Any) -> None:
        super().__init__(result.report)
        self.result = result

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        return json.loads(json.dumps({"a": r.names[0], "b": r.names[1], "result": r.report.to_dict(),
                                      "cases": r.cases}, default=str))

    @property
    def answers(self) -> list[str]:
        from profctl.pipelines.ab_pipeline import answer

        return [answer(r, self.comparison.confidence) for r in self.comparison.rows]

    def _repr_html_(self) -> str:
        from profctl.render import compare_view

        cmp = self.comparison
        return notebook_view.comparison_html(compare_view.header_lines(cmp), compare_view.display_rows(cmp),
                                             compare_view.footer_lines(cmp), answers=self.answers)


class TimelineResult:
    """Proton timelines (``profctl.proton``, ``profctl.timeline``): per kernel its scopes, warps, overlaps and
    critical path. ``.to_dict()`` is ``profctl proton -f json`` (one report: its dict; several: a list);
    ``.to_dataframe()`` every scope of every kernel; ``.reports`` the TimelineReports; ``.run_dir`` where a run
    of profctl proton keeps its files."""

    def __init__(self, reports: list[Any], run_dir: Path | None = None, result: Any = None) -> None:
        self.reports, self.run_dir, self.result = reports, run_dir, result

    def to_dict(self) -> Any:
        docs = [json.loads(json.dumps(r.to_dict())) for r in self.reports]
        return docs[0] if len(docs) == 1 else docs

    def to_dataframe(self) -> pd.DataFrame:
        return _frame([{"source": r.source, **s} for r in self.reports for s in r.to_dict()["scopes"]])

    def _repr_html_(self) -> str:
        return notebook_view.timeline_html(self.reports)

    def _repr_markdown_(self) -> str:
        from profctl.render import timeline_view

        return "\n".join(timeline_view.to_markdown(r, 20) for r in self.reports)


class DisplayedSummary(Summary):
    """A Summary (profctl.read) with a notebook display: its kernels by total time."""

    def _repr_html_(self) -> str:
        from profctl.render import summary_view

        rows = summary_view.kernel_rows(self) or summary_view.cpu_op_rows(self)
        lead = [f"{len(self.kernels)} kernels, {sum(k.total_ns for k in self.kernels) / 1e6:,.3f} ms in total",
                f"from {summary_view.sources_line(self)}"]
        return notebook_view.table_html(lead, rows, list(self.warnings))

    def _repr_markdown_(self) -> str:
        from profctl.render import summary_view

        return summary_view.to_markdown(self, 30)


class DisplayedBench(BenchResult):
    """A BenchResult (profctl.bench) with a notebook display: the rows as ``profctl bench`` prints them."""

    def _repr_html_(self) -> str:
        from profctl.render import bench_view

        lead = [f"profctl bench on {self.device.get('name') or 'cpu'}: {len(self.rows)} rows",
                f"run: {self.run_dir}"]
        return notebook_view.table_html(lead, bench_view.display_rows(self), bench_view.warning_lines(self))

    def _repr_markdown_(self) -> str:
        from profctl.render import bench_view

        return bench_view.to_markdown(self)


def displayed(x: Any) -> Any:
    """A Summary or BenchResult as its displayed kind (the same fields, and ``_repr_html_``)."""
    kind = DisplayedSummary if isinstance(x, Summary) else DisplayedBench if isinstance(x, BenchResult) else None
    if kind is None or isinstance(x, kind):
        return x
    return kind(**{f.name: getattr(x, f.name) for f in fields(x) if f.init})


def progress_callback(on: bool | Callable[[Any], None] | None, what: str) -> Callable[[Any], None] | None:
    """The progress callback a call gets: a callable as given; True, or None in a notebook, one line that rewrites
    itself (notebook_view.LineProgress); False or None elsewhere: none."""
    if callable(on):
        return on
    if on is False:
        return None
    line = notebook_view.LineProgress(what)
    return line if on or line.notebook else None


def _fraction(v: float | str | None, name: str, *, zero: bool = False) -> float | None:
    """A threshold as a fraction: 0.05, or text as the command takes it, ``"5%"``."""
    if v is None or isinstance(v, float | int):
        x = None if v is None else float(v)
    else:
        t = str(v).strip()
        try:
            x = float(t[:-1]) / 100.0 if t.endswith("%") else float(t)
        except ValueError:
            raise UsageError(f"{name}={v!r}: give a fraction (0.05) or a percentage ('5%')") from None
    if x is not None and not (0 < x < 1 or (zero and x == 0)):
        raise UsageError(f"{name}={v!r}: a fraction between 0 and 1 (0.05 is 5 %)")
    return x


def workload(**options: Any) -> Any:
    """The attention workload from options as Python values (as ``profctl.workload``, without ``model=``)."""
    from profctl.pipelines.targets import Workload
    from profctl.spec import AttentionSweep

    if "pass" in options:
        options["pass_"] = options.pop("pass")
    return Workload(AttentionSweep.from_strings(**options))


def _limit(v: float | str) -> float:
    """--fail-if-slower as a fraction: 0.05, ``"5%"``, ``"2x"`` (twice as slow: 1.0)."""
    if isinstance(v, str):
        from profctl.cli.compare_cmd import slower_limit

        return slower_limit(v, "fail_if_slower")
    if not v > 0:
        raise UsageError(f"fail_if_slower={v!r}: a positive fraction (0.05 is 5 %)")
    return float(v)


def explain(report: str | Path, report2: str | Path | None = None, *, kernel: str, vs: str | None = None,
            shape: str | None = None, reports: str | Path | None = None, changed: bool = False) -> ExplainResult:
    """``profctl explain REPORT [REPORT2] --kernel A [--vs B] [--shape S] [--changed]``, the same explanation (built
    by the command's own code) as an ExplainResult."""
    from profctl.cli._explain_build import build, shape_key

    key = shape_key(shape) if shape is not None else None
    e = build(str(report), kernel, vs=vs, report2=None if report2 is None else str(report2), shape=key,
              reports=Path(reports) if reports is not None else None, changed=changed)
    return ExplainResult(e)


@dataclass(frozen=True)
class CompareOptions:
    """``profctl compare``'s options, named as on the command line."""

    threshold: float | str | None = None
    fail_if_slower: float | str | None = None
    min_total_ms: float = 0.05
    min_samples: int = 5
    run_noise: float | str | None = None
    confidence: float = 0.95
    resamples: int = 4000
    by: str = "label"
    force: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def compare(base: str | Path, new: str | Path, *, reports: str | Path | None = None, **options: Any
            ) -> CompareResult:
    """``profctl compare BASE NEW`` (runs, run ids, bench JSON or summaries; a comma list for several runs a side)
    as a CompareResult. Options as the command's: threshold (0.02 or "2%"), fail_if_slower, min_total_ms,
    min_samples, run_noise (0 leaves it out), confidence, resamples, by, force. ``.gate()`` applies the gate."""
    from profctl import inputs, predictions, run_store
    from profctl.analysis.compare import compare_runs
    from profctl.analysis.compare.rows import Floors
    from profctl.analysis.compare.stats import NO_RUN_NOISE, RunNoise

    try:
        o = CompareOptions(**options)
    except TypeError as e:
        raise UsageError(f"profctl.compare: {e}") from None
    if o.resamples < 100 or not 0 < o.confidence < 1 or o.by not in ("label", "backend") or o.min_samples < 3 \
            or o.min_total_ms < 0:
        raise UsageError("profctl.compare: resamples >= 100, 0 < confidence < 1, by 'label' or 'backend', "
                         "min_samples >= 3 and min_total_ms >= 0")
    limit = _limit(o.fail_if_slower) if o.fail_if_slower is not None else None
    delta = _fraction(o.threshold, "threshold")
    if limit is not None and delta is not None and delta > limit:
        raise UsageError(f"threshold={o.threshold!r} is larger than fail_if_slower={o.fail_if_slower!r}: a "
                         "slowdown between the two would count as unchanged and pass the gate")
    noise_v = _fraction(o.run_noise, "run_noise", zero=True)
    noise = None if noise_v is None else NO_RUN_NOISE if noise_v == 0 else RunNoise(noise_v, "given with run_noise")
    root = Path(reports) if reports is not None else None
    b, n = inputs.load_sides(str(base), root), inputs.load_sides(str(new), root)
    result = compare_runs(b, n, threshold=delta, confidence=o.confidence, resamples=o.resamples, by=o.by,
                          force=o.force, floors=Floors(total_ns=o.min_total_ms * 1e6, samples=o.min_samples),
                          limit=limit, noise=noise)
    if b.kind == "summary" and not b.members:  # what explain predicted for BASE's kernels, as the command says
        result.warnings += predictions.in_comparison(run_store.reports_root(root), Path(b.path), result.rows)
    return CompareResult(result)


def ab(a: Any, b: Any, *, rounds: int = 20, threshold: float | str | None = None,
       fail_if_slower: float | str | None = None, reports: str | Path | None = None, timeout_s: float = 900.0,
       **options: Any) -> AbCompareResult:
    """``profctl bench --ab A,B``: two backends or attention functions (names, ``file.py:fn`` or callables)
    timed in alternating rounds in one process; the workload's options as for ``profctl.bench`` (seqlen, heads,
    device, iters, ...). An AbCompareResult (``.answers``, ``.to_dict()`` as ``-f json``)."""
    from profctl.pipelines import ab_pipeline
    from profctl.pipelines.executors import Local

    if "backend" in options:
        raise UsageError("profctl.ab(a, b, ...) names both variants; leave out backend=")
    wl = workload(backend=[a], **options)
    pair = workload(backend=[a, b], **options).sweep.backends  # B read as the command reads --ab A,B
    limit = _limit(fail_if_slower) if fail_if_slower is not None else None
    req = ab_pipeline.AbRequest(target=wl, variant_b=pair[-1], rounds=rounds,
                                threshold=_fraction(threshold, "threshold"), limit=limit,
                                reports=Path(reports) if reports is not None else None, case_timeout_s=timeout_s,
                                executor=Local())
    ab_pipeline.check(req)
    return AbCompareResult(ab_pipeline.run(req))


def proton(*, progress: bool | Callable[[Any], None] | None = None, **options: Any) -> TimelineResult:
    """``profctl proton``: profctl's Triton forward (or ``program=["python", "x.py"]``) under Proton; the
    workload's options as for ``profctl.bench`` plus buffer, warps, granularity, clock, data, ctas, cta,
    overhead_iters, reports, timeout_s. Needs a CUDA GPU and Triton with Proton."""
    from profctl.pipelines import proton_pipeline
    from profctl.pipelines.targets import Program
    from profctl.tools.proton import ProtonOptions, parse_ctas

    names = ("buffer", "buffer_size", "warps", "granularity", "clock", "time_shift", "data")
    popts: dict[str, Any] = {k: options.pop(k) for k in names if k in options}
    if "ctas" in options:  # a number of CTAs, or "all"
        popts["ctas"] = parse_ctas(str(options.pop("ctas")))
    req_kw = {k: options.pop(k) for k in ("overhead_iters", "cta", "timeout_s") if k in options}
    reports = options.pop("reports", None)
    program = options.pop("program", None)
    if program is None:
        options.setdefault("backend", "triton")
    target = Program(command=tuple(program)) if program is not None else workload(**options)
    req = proton_pipeline.ProtonRequest(target=target, options=ProtonOptions(**popts),
                                        reports=Path(reports) if reports else None, **req_kw)
    on = progress_callback(progress, "proton")
    res = proton_pipeline.run(req, on_progress=on)
    if isinstance(on, notebook_view.LineProgress):
        on.close()
    return TimelineResult([r.report for r in res.recordings], res.run_dir, res)


def timeline(path: str | Path, *, cta: int | None = None, reports: str | Path | None = None) -> TimelineResult:
    """A recorded Proton trace or tree (``.chrome_trace``, ``.hatchet``, compressed or not, or a run of profctl
    proton) read into its figures, as ``profctl report TRACE`` shows them."""
    from profctl.cli import _timelines

    found = _timelines.proton_inputs([Path(path)], Path(reports) if reports is not None else None)
    if not found:
        raise UsageError(f"{path}: not a Proton trace or tree (profctl.read reads kernel reports)")
    return TimelineResult([_timelines.load(i, cta=cta) for i in found])
