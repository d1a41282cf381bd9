"""`profctl bench --ab A,B` and `profctl bench -b X --ab-env 'VAR=x|VAR=y'`: the interleaved A/B, from the bench
command's options to the one-line answer per case (profctl.pipelines.ab_pipeline runs it)."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from profctl.cli._command import command_line, conflict, given, percent
from profctl.cli._messages import note, warn
from profctl.cli._output import check_outputs, check_reports, emit
from profctl.cli.compare_cmd import slower_limit
from profctl.errors import ProfctlError, SpecError, UsageError
from profctl.render.tables import console, print_table, text_console


def refuse_without_ab(fail_if_slower: str | None, threshold: str | None) -> None:
    """Options that only mean something with --ab, given without it."""
    for flag, on in (("--rounds", given("rounds")), ("--fail-if-slower", fail_if_slower is not None),
                     ("--threshold", threshold is not None)):
        if on:
            raise conflict(flag, "no --ab", f"{flag} applies to an A/B run (--ab A,B or --ab-env); a plain "
                           "bench run compares nothing (profctl compare BASE NEW does)")


def run_ab(wl: Any, *, ab: str | None, ab_env: str | None, rounds: int, threshold: str | None,
           fail_if_slower: str | None, strict: bool, format: str, output: Path | None, reports: Path | None,
           timeout: float, quiet: bool, label: str | None, executor: Any) -> None:
    """Check the options, run the A/B, print its answer, and apply --fail-if-slower (exit 1 on a regression)."""
    from profctl.analysis.compare.gate import gate
    from profctl.pipelines import ab_pipeline
    from profctl.pipelines.targets import Workload

    req = _request(wl, ab=ab, ab_env=ab_env, rounds=rounds, threshold=threshold, fail_if_slower=fail_if_slower,
                   reports=reports, timeout=timeout, label=label, executor=executor)
    if not isinstance(req.target, Workload):
        raise UsageError("--ab compares attention functions or backends; it does not take --model")
    ab_pipeline.check(req)
    if strict and req.limit is None:
        raise conflict("--strict", "--ab without --fail-if-slower", "with --ab, --strict makes inconclusive "
                       "cases fail the --fail-if-slower gate; give --fail-if-slower too")
    check_outputs(("-o", output))
    check_reports(reports)
    a, b = ab_pipeline.names(req)
    if not quiet:
        note(f"A/B: {b} against {a}, {req.rounds} rounds of {req.target.sweep.iters} iterations each")
    res = ab_pipeline.run(req)
    _show(res, format, output, quiet=quiet)
    note(f"run: {res.run_dir}")
    if not any(r.ratio is not None for r in res.report.rows):
        first = res.cases[0] if res.cases else {}
        raise ProfctlError(f"no case ran: {first.get('status')}: {first.get('reason')}")
    if req.limit is None:
        return
    verdict = gate(res.report, req.limit, strict=strict)
    if verdict.warning():
        warn(verdict.warning() or "")
    failure = verdict.error()
    if failure is not None:
        raise failure


def _request(wl: Any, *, ab: str | None, ab_env: str | None, rounds: int, threshold: str | None,
             fail_if_slower: str | None, reports: Path | None, timeout: float, label: str | None,
             executor: Any) -> Any:
    """The A/B request the options describe; UsageError for options that contradict it."""
    from profctl.pipelines import ab_pipeline
    from profctl.pipelines.executors import Local
    from profctl.spec import parse_backends

    if ab is not None and ab_env is not None:
        raise conflict("--ab", "--ab-env", "--ab compares two backends or functions, --ab-env one backend under "
                       "two environment settings; give one")
    for flag, name in (("--baseline", "baseline"), ("--label", "label")):
        if given(name) or (name == "label" and label):
            raise conflict("--ab" if ab is not None else "--ab-env", flag, "an A/B names its two variants itself")
    variant_b = None
    sweep = wl.sweep
    if ab is not None:
        if given("backend"):
            raise conflict("--ab", "--backend", "--ab A,B names both variants (backends or file.py:fn)")
        try:
            pair = parse_backends(ab, option="--ab")
        except SpecError as e:
            raise UsageError(str(e)) from None
        if len(pair) != 2:
            raise UsageError(f"--ab {ab!r}: give two variants, A,B (old,new), e.g. --ab old.py:attn,new.py:attn")
        variant_b = pair[1]
        if pair[0] == pair[1]:
            warn(f"--ab {ab}: A and B are the same variant: the answer measures only the noise between rounds (an "
                 "A/A run)")
        wl = type(wl)(sweep.with_backends(pair[:1]))
        env_a: tuple[tuple[str, str], ...] = ()
        env_b: tuple[tuple[str, str], ...] = ()
    else:
        assert ab_env is not None
        if len(sweep.backends) != 1:
            raise UsageError("--ab-env runs one function under two settings: give exactly one --backend")
        env_a, env_b = ab_pipeline.parse_env_pair(ab_env)
    limit = slower_limit(fail_if_slower) if fail_if_slower is not None else None
    delta = percent(threshold, "--threshold") if threshold is not None else None
    if limit is not None and delta is not None and delta > limit:
        raise conflict(f"--threshold {threshold}", f"--fail-if-slower {fail_if_slower}",
                       "a slowdown between the two would count as unchanged and pass the gate")
    return ab_pipeline.AbRequest(target=wl, variant_b=variant_b, env_a=env_a, env_b=env_b, rounds=rounds,
                                 threshold=delta, limit=limit, reports=reports, case_timeout_s=timeout,
                                 command=command_line(), executor=executor or Local())


def _show(res: Any, format: str, output: Path | None, *, quiet: bool) -> None:
    """The answer: one line per case on stdout; the tables (rounds, comparison) unless quiet; or the format."""
    from profctl.pipelines.ab_pipeline import answer
    from profctl.render import compare_view

    lines = [answer(r, res.report.confidence) for r in res.report.rows]
    to_stdout = output is None or str(output) == "-"
    if format == "json":
        emit(json.dumps({"a": res.names[0], "b": res.names[1], "result": res.report.to_dict(),
                         "cases": res.cases}, indent=1, default=str) + "\n", output)
    elif format in ("markdown", "csv"):
        emit(compare_view.to_markdown(res.report) if format == "markdown" else compare_view.to_csv(res.report),
             output)
    elif not to_stdout:
        con, buf = text_console()
        _tables(res, con)
        emit(buf.getvalue() + "\n".join(lines) + "\n", output)
    elif not quiet:
        _tables(res, console())
    if format == "table" or not to_stdout:  # the answer, unless stdout holds the data
        sys.stdout.write("\n".join(lines) + "\n")


def _tables(res: Any, con: Any) -> None:
    from profctl.render import compare_view

    for c in res.cases:
        rows = [{"round": r.get("round"), "order": r.get("order"), "A ms": _med(r.get("a_ms")),
                 "B ms": _med(r.get("b_ms")), "B/A": _ratio(r), "A SM MHz": _mhz(r.get("a_clocks")),
                 "B SM MHz": _mhz(r.get("b_clocks"))} for r in c.get("rounds") or []]
        if rows:
            spec = c.get("spec") or {}
            print_table(con, f"rounds: A = {res.names[0]}, B = {res.names[1]}; seqlen {spec.get('seqlen_q')} "
                             f"{spec.get('pass')}", rows)
    compare_view.to_console(res.report, con)


def _med(xs: Any) -> str:
    return f"{statistics.median(xs):.4f}" if xs else "-"


def _ratio(r: dict[str, Any]) -> str:
    a, b = r.get("a_ms"), r.get("b_ms")
    if not a or not b or statistics.median(a) <= 0:
        return "-"
    return f"{statistics.median(b) / statistics.median(a):.4f}"


def _mhz(c: Any) -> str:
    return f"{c['sm_clock_mhz_median']:.0f}" if isinstance(c, dict) and c.get("sm_clock_mhz_median") else "-"
