"""The interleaved A/B pipeline (``profctl bench --ab A,B``, ``profctl bench -b X --ab-env 'VAR=x|VAR=y'``): two
variants of each case of the sweep timed in alternating rounds in one workload process
(``python -m profctl.workloads.ab``), the rounds paired, and the change with its interval.

Sequential runs meet clock and thermal drift, and whatever else differs between two processes (a memory
placement, an autotuner's pick); interleaving puts both variants under the same conditions round by round. Per
round each variant's iterations; the round is the unit: each round's ``median(B) / median(A)``, and the estimate
is the median of those ratios with its distribution-free interval from the rounds' order statistics
(profctl.analysis.compare.stats.paired_rounds), so a few rounds where the process sat in another mode (a 1.6 ms and
a 64 ms state of one CPU process) widen the interval and do not decide it; two modes in a variant's iterations are
said (profctl.analysis.compare.stats.iteration_modes, the check ``compare`` makes), and the verdict follows the
rules every comparison uses (profctl.analysis.compare.stats.decide). NVML's SM clock is sampled through the run and
read per round. Run directory: ``manifest.json``, ``events.jsonl`` (the child's events: every round's iteration
times), ``workload.log``, ``ab.json`` (per case: the rounds with their clocks, and the result).
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profctl import proc, run_store
from profctl.analysis.compare.rows import CASE_FIELDS, CLOCK_TOLERANCE, CPU_THRESHOLD, Comparison, RowResult
from profctl.analysis.compare.stats import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_THRESHOLD,
    MIN_SAMPLES,
    decide,
    iteration_modes,
    paired_rounds,
    pct,
    pct_change,
    same_mode_rounds,
    samples_needed,
)
from profctl.errors import UsageError, WorkloadFailed
from profctl.fsutil import atomic_write_json
from profctl.inputs import Side
from profctl.nvml import Sampler, here
from profctl.pipelines.base import Request, Result
from profctl.pipelines.bench_rows import NOISE_IQR
from profctl.pipelines.executors import Local
from profctl.pipelines.targets import Workload
from profctl.schema.bench import BenchRow

EVENTS = "events.jsonl"
LOG = "workload.log"
AB_FILE = "ab.json"
MODULE = "profctl.workloads.ab"


@dataclass(frozen=True, kw_only=True)
class AbRequest(Request):
    """Two variants of the target's cases: the target's one backend is A; B is `variant_b` (another backend),
    or the same backend under `env_b` where A runs under `env_a` (VAR=VALUE pairs set in the process)."""

    variant_b: str | None = None
    env_a: tuple[tuple[str, str], ...] = ()
    env_b: tuple[tuple[str, str], ...] = ()
    rounds: int = 20
    threshold: float | None = None  # None: 2 %, 10 % on a CPU (as profctl compare's defaults)
    limit: float | None = None  # --fail-if-slower: the band narrows to it when smaller
    confidence: float = DEFAULT_CONFIDENCE
    resamples: int = DEFAULT_RESAMPLES
    case_timeout_s: float = 900.0


@dataclass(kw_only=True)
class AbResult(Result):
    """The comparison (one row per case, kind ``ab``), every case's rounds with their clocks, and the names."""

    report: Comparison
    cases: list[dict[str, Any]] = field(default_factory=list)
    names: tuple[str, str] = ("A", "B")
    device: dict[str, Any] = field(default_factory=dict)


def names(req: AbRequest) -> tuple[str, str]:
    """How the two variants are called in tables: their backends, or the backend with each environment."""
    (a,) = req.target.backends()
    if req.variant_b is not None:
        return a, req.variant_b
    return tuple(f"{a} {_env_text(e) or '(environment as is)'}" for e in (req.env_a, req.env_b))  # type: ignore[return-value]


def _env_text(env: tuple[tuple[str, str], ...]) -> str:
    return ",".join(f"{k}={v}" for k, v in env)


def check(req: AbRequest) -> None:
    """UsageError for an A/B that cannot run or compares nothing, before anything runs."""
    if not isinstance(req.target, Workload):
        raise UsageError("--ab compares attention functions or backends (the attention workload), not a model "
                         "or a program")
    if not isinstance(req.executor, Local):
        raise UsageError("--ab runs both variants in one process on one device: leave out --workers/--cluster")
    if len(req.target.backends()) != 1:
        raise UsageError("--ab A,B names the two variants; --ab-env needs exactly one --backend")
    if req.rounds < MIN_SAMPLES:
        raise UsageError(f"--rounds {req.rounds}: at least {MIN_SAMPLES} (the interval is over the rounds)")
    if req.target.sweep.iters < 1:
        raise UsageError("--iters must be at least 1 (iterations of each variant per round)")
    if req.variant_b is None and dict(req.env_a) == dict(req.env_b):
        raise UsageError("--ab-env: the two settings are the same; give 'VAR=x|VAR=y'")
    if req.case_timeout_s <= 0:
        raise UsageError(f"--timeout must be positive, got {req.case_timeout_s:g}")


def run(req: AbRequest) -> AbResult:
    """Run the A/B in one workload process; the comparison per case. WorkloadFailed (naming the log) when the
    process gives no result at all."""
    check(req)
    assert isinstance(req.target, Workload)
    a, b = names(req)
    both = [req.target.backends()[0]] + ([req.variant_b] if req.variant_b is not None else [])
    target = req.target.with_backends(list(dict.fromkeys(both))).resolve()  # checks both functions
    target = target.with_backends(both[:1])
    extra = {**target.manifest(), "ab": {"a": a, "b": b, "variant_b": req.variant_b, "env_a": dict(req.env_a),
                                         "env_b": dict(req.env_b), "rounds": req.rounds}}
    run_dir = run_store.new_run("ab", root=req.reports, argv=list(req.command) if req.command else None,
                                label=f"{a} vs {b}", extra=extra)
    with run_store.recording(run_dir):
        events, sampler = _run_child(req, target, run_dir)
        cases = _cases(events, sampler)
        device = run_store.device_of(events)
        if not cases:
            raise WorkloadFailed("the A/B workload process ended before finishing any case",
                                 log=run_dir / LOG)
        report = _report(req, run_dir, cases, device, (a, b))
        atomic_write_json(run_dir / AB_FILE, {"a": a, "b": b, "result": report.to_dict(), "cases": cases})
        done = sum(c.get("status") == "ok" for c in cases)
        status = "complete" if len(cases) == len(target.cases()) else "incomplete"
        run_store.finish(run_dir, status, device=device or None, points=len(target.cases()), rows=done,
                         ab_result=[_short(r) for r in report.rows])
    return AbResult(run_dir=run_dir, status=status, report=report, cases=cases, names=(a, b), device=device,
                    failed_cases=[c for c in cases if c.get("status") != "ok"])


def _run_child(req: AbRequest, target: Workload, run_dir: Path) -> tuple[list[dict[str, Any]], Any]:
    """The workload process, with NVML sampling the SM clock meanwhile (kept with wall times)."""
    argv = [target.python, "-m", MODULE, *target.sweep.to_argv(), "--rounds", str(req.rounds),
            "--jsonl", str(run_dir / EVENTS)]
    if req.variant_b is not None:
        argv += ["--variant-b", req.variant_b]
    if req.env_a:
        argv += ["--env-a", _env_text(req.env_a)]
    if req.env_b:
        argv += ["--env-b", _env_text(req.env_b)]
    cuda = target.device == "cuda"
    index = int(str(here("cuda").get("gpu_index", 0))) if cuda else -1
    sampler = Sampler(index, series=True).start() if cuda else Sampler(-1)
    run_store.record_tool(run_dir, "workload", argv, log=LOG)
    try:
        proc.run(argv, log=run_dir / LOG, env=target.env(), check=False,
                 timeout_s=req.case_timeout_s * len(target.cases()) + 300)
    finally:
        sampler.stop()
    return run_store.read_events(run_dir / EVENTS), sampler


def _cases(events: list[dict[str, Any]], sampler: Any) -> list[dict[str, Any]]:
    """Per case: its ``ab`` event with its rounds, each round with the SM clock NVML saw during it (and during
    each variant's block)."""
    rounds: dict[int, list[dict[str, Any]]] = {}
    for e in events:
        if e.get("event") == "round":
            r = {k: v for k, v in e.items() if k not in ("event", "index")}
            if sampler.series is not None:
                for v in ("a", "b"):
                    t0, t1 = (r.get(f"{v}_wall") or [0.0, 0.0])[:2]
                    r[f"{v}_clocks"] = sampler.window(float(t0), float(t1)) or None
            rounds.setdefault(int(e.get("index", -1)), []).append(r)
    out = []
    for e in events:
        if e.get("event") == "ab":
            c = {k: v for k, v in e.items() if k != "event"}
            c["rounds"] = rounds.get(int(e.get("index", -1)), [])
            out.append(c)
    return out


def _report(req: AbRequest, run_dir: Path, cases: list[dict[str, Any]], device: dict[str, Any],
            nm: tuple[str, str]) -> Comparison:
    assert isinstance(req.target, Workload)
    return judge(run_dir, cases, nm, cpu=device.get("name") == "cpu", iters=req.target.sweep.iters,
                 threshold=req.threshold, limit=req.limit, confidence=req.confidence)


def judge(run_dir: Path, cases: list[dict[str, Any]], nm: tuple[str, str], *, cpu: bool, iters: int | None,
          threshold: float | None = None, limit: float | None = None,
          confidence: float = DEFAULT_CONFIDENCE) -> Comparison:
    """The comparison of an A/B's cases (their rounds): one row per case, kind ``ab``. `threshold` None: 2 %, 10 %
    on a CPU, narrowed to `limit` (``--fail-if-slower``) when that is smaller."""
    why = ""
    if threshold is None:
        threshold, why = (CPU_THRESHOLD, "the default for CPU timings") if cpu else (DEFAULT_THRESHOLD, "the default")
        if limit is not None and limit < threshold:
            threshold, why = limit, "narrowed to --fail-if-slower"
    manifest = run_store.Manifest.from_dict(run_store.read_manifest(run_dir))
    sides = [Side(ref=n, kind="ab", path=run_dir, name=n, manifest=manifest, status="complete") for n in nm]
    rows = [_row(c, nm, threshold=threshold, confidence=confidence) for c in cases]
    method = (f"interleaved rounds of {iters if iters is not None else '?'} iterations of A and of B (alternating "
              "which goes first), the round as the unit: the median over rounds of each round's median(B)/median(A), "
              f"with its distribution-free {confidence * 100:g}% interval from the rounds' order statistics")
    return Comparison(base=sides[0], new=sides[1], rows=rows, threshold=threshold, confidence=confidence,
                      method=method, by="ab", kind="ab", threshold_why=why)


def report_of(run_dir: Path, *, threshold: float | None = None, limit: float | None = None,
              confidence: float = DEFAULT_CONFIDENCE) -> Comparison:
    """An A/B run judged again from what it recorded (``ab.json``'s rounds): what benchmarks/run_noise.py uses to
    judge recorded runs with today's rules."""
    doc = json.loads((Path(run_dir) / AB_FILE).read_text())
    cases = list(doc.get("cases") or [])
    cpu = all((c.get("spec") or {}).get("device") == "cpu" for c in cases) if cases else False
    return judge(Path(run_dir), cases, (str(doc.get("a")), str(doc.get("b"))), cpu=cpu, iters=None,
                 threshold=threshold, limit=limit, confidence=confidence)


def _row(c: dict[str, Any], nm: tuple[str, str], *, threshold: float, confidence: float) -> RowResult:
    """One case's paired comparison, the round as the unit."""
    spec = BenchRow.from_dict(c.get("spec") or {})
    case: dict[str, Any] = {"name": "A/B", "backend_base": nm[0], "backend_new": nm[1], "shape": spec.shape_label(),
                            "pass": spec.pass_}
    case.update({f: spec.get(f) for f in CASE_FIELDS if f != "pass"})
    rr = RowResult(case=case, base_ms=None, new_ms=None, method="paired rounds")
    if c.get("status") != "ok":
        rr.verdict = "failed" if str(c.get("reason") or "").startswith("variant B") else "n/a"
        rr.notes.append(f"{c.get('status')}: {c.get('reason')}")
        return rr
    rs = [r for r in c.get("rounds") or [] if r.get("a_ms") and r.get("b_ms")]
    a_all = [x for r in rs for x in r["a_ms"]]
    b_all = [x for r in rs for x in r["b_ms"]]
    if not rs:
        rr.notes.append("no round finished")
        return rr
    rr.base_ms, rr.new_ms = statistics.median(a_all), statistics.median(b_all)
    rr.n_base = rr.n_new = len(rs)
    if len(rs) < MIN_SAMPLES:
        rr.ratio = rr.new_ms / rr.base_ms if rr.base_ms else None
        rr.verdict = "inconclusive"
        rr.notes.append(f"{len(rs)} rounds; at least {MIN_SAMPLES} needed for an interval")
        return rr
    keep = same_mode_rounds([r["a_ms"] for r in rs], [r["b_ms"] for r in rs])
    judged = rs if keep is None else [rs[i] for i in keep]
    rr.ratio, rr.ci_lo, rr.ci_hi, conf = paired_rounds([r["a_ms"] for r in judged], [r["b_ms"] for r in judged],
                                                        confidence=confidence)
    if keep is not None:
        rr.notes.append(f"{len(rs) - len(keep)} of {len(rs)} rounds had A and B in different modes of the process "
                        f"(each variant's blocks visit two: the machine's states): left out, the {len(keep)} rounds "
                        "with both in the same mode are the answer")
    rr.verdict, why = decide(rr.ratio, rr.ci_lo, rr.ci_hi, threshold)
    if conf < confidence - 1e-9:
        rr.notes.append(f"{len(judged)} rounds: the interval from the smallest to the largest round, {conf * 100:.1f}% "
                        "confidence")
    if why:
        need = samples_needed(len(judged), rr.ci_lo, rr.ci_hi, threshold)
        rr.notes.append(why + (f"; about --rounds {need} would tell" if need > len(judged) else ""))
    modes = [g for g in (iteration_modes(a_all, "A's iterations"), iteration_modes(b_all, "B's iterations"))
             if g is not None]
    if modes:
        rr.groups = max(modes, key=lambda g: g.ratio)
        rr.notes.append(f"{rr.groups.words()}: the process switched modes between rounds; " + (
            "the rounds that straddled a switch are left out (above)" if keep is not None else
            "each round's ratio is taken within the round and the median over rounds is the answer, so a few "
            "rounds that straddle a switch widen the interval and do not decide it"))
    for side, xs in (("A", a_all), ("B", b_all)):
        spread = _iqr(xs)
        if spread > NOISE_IQR:
            rr.notes.append(f"{side}: unsteady times (interquartile range {spread * 100:.0f}% of the median): a "
                            "busy machine?")
    for v in c.get("variants") or []:
        if v.get("check") == "fail":
            rr.notes.append(f"variant {v.get('variant')}: output check failed (rel. error {v.get('rel_error')})")
    _clocks(rr, rs, threshold)
    return rr


def _iqr(xs: list[float]) -> float:
    """Interquartile range over the median (0 for fewer than 4 times)."""
    if len(xs) < 4:
        return 0.0
    q = statistics.quantiles(xs, n=4)
    med = statistics.median(xs)
    return (q[2] - q[0]) / med if med > 0 else 0.0


def _clocks(rr: RowResult, rs: list[dict[str, Any]], threshold: float) -> None:
    """The SM clock over the rounds, and whether A's blocks ran at another clock than B's (enough to explain the
    change: then it is inconclusive)."""
    def meds(v: str) -> list[float]:
        return [float((r.get(f"{v}_clocks") or {}).get("sm_clock_mhz_median") or 0) for r in rs
                if (r.get(f"{v}_clocks") or {}).get("sm_clock_mhz_median")]

    ma, mb = meds("a"), meds("b")
    if not ma or not mb:
        return
    reasons = sorted({x for r in rs for v in ("a", "b") for x in (r.get(f"{v}_clocks") or {}).get(
        "throttle_reasons") or []})
    lo, hi = min(ma + mb), max(ma + mb)
    ca, cb = statistics.median(ma), statistics.median(mb)
    rr.notes.append(f"SM clock {lo:.0f}..{hi:.0f} MHz over the rounds (A {ca:.0f}, B {cb:.0f} MHz median)"
                    + (f"; throttle reasons: {', '.join(reasons)}" if reasons else ""))
    slack = abs(cb / ca - 1.0) if ca else 0.0
    if slack > CLOCK_TOLERANCE and rr.verdict in ("slower", "faster") and rr.ratio is not None and \
            abs(math.log(rr.ratio)) <= math.log(1.0 + threshold) + slack:
        rr.verdict = "inconclusive"
        rr.notes.append(f"a clock difference of {slack * 100:.1f}% could explain a change this small")


def _short(r: RowResult) -> dict[str, Any]:
    """What the manifest keeps of a case's result."""
    return {"shape": r.case.get("shape"), "pass": r.case.get("pass"), "ratio": r.ratio, "ci_lo": r.ci_lo,
            "ci_hi": r.ci_hi, "noise_floor": r.noise_floor, "verdict": r.verdict}


def answer(r: RowResult, confidence: float) -> str:
    """The one-line answer for a case: 'B vs A, shape pass: +3.1% (95% CI ...; noise floor ...): slower'."""
    c = r.case
    head = f"{c['backend_new']} vs {c['backend_base']}, {c['shape']} {c['pass']}: "
    if r.ratio is None:
        return head + r.verdict + (f" ({r.notes[0]})" if r.notes else "")
    body = f"{pct_change(r.ratio)} time"
    if r.ci_lo is not None and r.ci_hi is not None:
        body += (f" ({confidence * 100:g}% CI {pct_change(r.ci_lo)}..{pct_change(r.ci_hi)}, noise floor "
                 f"{pct(r.noise_floor)}, {r.n_base} rounds)")
    return f"{head}{body}: {r.verdict}"



def parse_env_pair(text: str) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """``--ab-env 'VAR=x|VAR=y'`` (each side a comma list of VAR=VALUE; a side may be empty: the environment as
    it is) -> A's and B's settings; UsageError naming the bad part."""
    sides = text.split("|")
    if len(sides) != 2:
        raise UsageError(f"--ab-env {text!r}: give two settings separated by '|', e.g. 'MY_TILE=64|MY_TILE=128'")
    out = []
    for side in sides:
        pairs = []
        for part in (p.strip() for p in side.split(",")):
            if not part:
                continue
            name, sep, value = part.partition("=")
            if not sep or not name.strip() or not name.strip().replace("_", "").isalnum():
                raise UsageError(f"--ab-env {text!r}: {part!r} is not VAR=VALUE")
            pairs.append((name.strip(), value))
        out.append(tuple(pairs))
    return out[0], out[1]
