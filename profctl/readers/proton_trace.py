"""Proton's timeline of scopes inside Triton kernels: the Chrome trace its instrumentation backend writes
(``proton.start(name, data="trace", backend="instrumentation")`` -> ``name.chrome_trace``), from any program,
plain, ``.gz`` or ``.xz``.

What the file holds (Triton 3.6's writer, checked on an H200; third_party/proton/common/lib/TraceDataIO): one
complete ("X") event per scope instance per warp. ``pid`` names the kernel, the SM and the CTA
(``"_fwd_kernel Core131 CTA0"``), ``tid`` the warp and a line for nested scopes (``"warp 3 (line 0)"``), ``name``
the scope, ``cat`` the kernel, ``args`` the host call stack of the launch and ``"Frequency (MHz)": 1000``. ``ts``
and ``dur`` are cycles divided by that frequency: Proton does not know the SM clock and assumes 1 GHz, so the
reader turns them back into cycles (``round(ts * MHz)``). Within a CTA the starts share one clock base (the CTA's
first recorded cycle); between CTAs they are offset by the CTA's start time in nanoseconds (the global timer),
so cycle differences are exact inside a CTA and approximate across CTAs.

Proton's circular buffer keeps the *last* events of each warp when it overflows and says so only on the
profiled program's standard error ("first N events are dropped due to insufficient buffer size"): the trace
itself cannot tell. :func:`drops_in_log` reads those lines from a log; profctl proton keeps them beside the trace.

Events are kept as columns (numpy arrays), so a trace of a million scope instances stays small in memory; the
file is streamed one event at a time (profctl.readers._torch_stream). Figures are made in
profctl.analysis.timeline.
"""

from __future__ import annotations

import gzip
import lzma
import re
import zlib
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profctl.errors import BadReport
from profctl.readers import _torch_stream as stream

#: the suffix Proton gives the trace (``proton.start("name", data="trace")`` writes ``name.chrome_trace``)
SUFFIX = ".chrome_trace"
_PID = re.compile(r"^(?P<kernel>.*?)(?: Core(?P<core>\d+))? CTA(?P<cta>\d+)$")
#: "warp 3 (line 0)" as Triton 3.6 writes it; another unit's name (a warp group, a CTA) is read the same way
_TID = re.compile(r"^[A-Za-z_ ]*?(?P<warp>\d+)(?: \(line (?P<line>\d+)\))?$")
#: Proton's warning when a warp's events did not fit its buffer (printed while the trace is written)
_DROP = re.compile(r"Warning \(cta ?(?P<cta>\d+), ?warp ?(?P<warp>\d+)\): first (?P<lost>\d+) events are dropped "
                   r"due to insufficient buffer size \((?P<kept>\d+)/(?P<total>\d+)\)")
_PARSER = re.compile(r"ParserException \[offset=\d+\]: (?P<what>.*)")


def looks_like(head: str) -> bool:
    """Whether the first characters of a JSON file are those of Proton's trace (its writer sorts keys, so the
    first event's ``args`` -- with ``Frequency (MHz)`` -- and its ``pid`` of kernel, SM and CTA come early)."""
    return '"traceEvents"' in head and ('"Frequency (MHz)"' in head or bool(re.search(r' Core\d+ CTA\d+"', head))
                                        or (bool(re.search(r' CTA\d+"', head)) and '"warp ' in head))


@dataclass(frozen=True)
class Kernel:
    """One kernel of the trace: its name and the host call stack of its launch (two call sites of one kernel
    are two kernels here)."""

    name: str
    call_stack: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return self.name


@dataclass
class Drops:
    """What Proton said it dropped when it wrote the trace: per (CTA, warp) the records lost (the *first* ones:
    its buffer is circular; Proton's message calls them events, and a scope instance is two of them: its start and
    its end) and kept; and its parser's complaints (scope mismatches, clock overflow)."""

    warps: list[tuple[int, int, int, int]] = field(default_factory=list)  # (cta, warp, records lost, kept)
    parser: list[str] = field(default_factory=list)

    @property
    def lost(self) -> int:
        return sum(w[2] for w in self.warps)

    def describe(self) -> str | None:
        """One line for the user, or None when nothing was lost."""
        out = []
        if self.warps:
            ctas = len({w[0] for w in self.warps})
            kept = min(w[3] for w in self.warps)
            out.append(f"Proton's buffer overflowed: {self.lost} records lost (start and end marks: about "
                       f"{self.lost // 2} scope instances; the first ones of {len(self.warps)} warp(s) in {ctas} "
                       f"CTA(s), room for {kept} records per warp): the timeline of those warps starts late; give "
                       "--buffer global, a larger --buffer-size, or fewer warps (--warps)")
        if self.parser:
            out.append(f"Proton's parser reported {len(self.parser)} problem(s), first: {self.parser[0]}")
        return "; ".join(out) or None

    def to_dict(self) -> dict[str, Any]:
        return {"warps": [list(w) for w in self.warps], "parser": list(self.parser), "lost": self.lost}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Drops:
        return cls(warps=[(int(a), int(b), int(c), int(e)) for a, b, c, e in d.get("warps", [])],
                   parser=[str(x) for x in d.get("parser", [])])


def drops_in_log(text: str) -> Drops:
    """Proton's overflow warnings and parser complaints in a program's output (profctl proton's log)."""
    d = Drops()
    for m in _DROP.finditer(text):
        d.warps.append((int(m["cta"]), int(m["warp"]), int(m["lost"]), int(m["kept"])))
    d.parser = [m["what"].strip() for m in _PARSER.finditer(text)][:100]
    return d


@dataclass
class ProtonTrace:
    """A Proton trace as columns: event i is scope ``scopes[scope[i]]`` on warp ``warp[i]`` (nesting line
    ``line[i]``) of CTA ``ctas[cta[i]]`` (kernel index, SM, CTA id) of kernel ``kernels[...]``, from cycle
    ``start[i]`` for ``dur[i]`` cycles."""

    path: str
    kernels: list[Kernel]
    scopes: list[str]
    ctas: list[tuple[int, int, int]]  # (kernel index, SM, CTA id)
    cta: Any  # numpy int32 arrays, one value per event
    warp: Any
    line: Any
    scope: Any
    start: Any  # numpy int64: cycles (see the module's note on clock bases)
    dur: Any
    freq_mhz: float = 1000.0
    skipped: int = 0  # events that were not scope instances (metadata, other tools' events)
    finalize_ns: int | None = None  # the longest time a CTA took to copy its buffer out (Proton's arg)
    drops: Drops = field(default_factory=Drops)

    @property
    def n_events(self) -> int:
        return len(self.scope)

    def kernel_of_event(self) -> Any:
        """The kernel index of every event (numpy)."""
        import numpy as np

        of_cta = np.array([c[0] for c in self.ctas], dtype=np.int32) if self.ctas else np.zeros(0, np.int32)
        return of_cta[self.cta] if len(self.cta) else np.zeros(0, np.int32)


class _Collect:
    """Events into columns, with the strings (pids, tids, names, call stacks) parsed once each."""

    def __init__(self) -> None:
        self.kernels: dict[Kernel, int] = {}
        self.scopes: dict[str, int] = {}
        self.ctas: dict[tuple[int, int, int], int] = {}
        self.pids: dict[tuple[str, tuple[str, ...]], int | None] = {}
        self.tids: dict[str, tuple[int, int] | None] = {}
        self.cols = {k: array("i") for k in ("cta", "warp", "line", "scope")}
        self.start, self.dur = array("q"), array("q")
        self.freq: float | None = None
        self.skipped = 0
        self.n_events = 0
        self.finalize_ns: int | None = None

    def add(self, ev: Any) -> None:
        self.n_events += 1
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            self.skipped += 1
            return
        args = ev.get("args")
        args = args if isinstance(args, dict) else {}
        stack = args.get("call_stack")
        key = (str(ev.get("pid")), tuple(str(x) for x in stack) if isinstance(stack, list) else ())
        cta = self.pids.get(key, -1)
        if cta == -1:
            cta = self.pids[key] = self._cta(*key)
        tid = self.tids.get(str(ev.get("tid")), (-1, -1))
        if tid == (-1, -1):
            tid = self.tids[str(ev.get("tid"))] = _warp_line(str(ev.get("tid")))
        ts, dur = _number(ev.get("ts")), _number(ev.get("dur"))
        if cta is None or tid is None or ts is None or dur is None or dur < 0:
            self.skipped += 1
            return
        freq = _number(args.get("Frequency (MHz)"))
        if self.freq is None and freq is not None and freq > 0:
            self.freq = freq
        fin = _number(args.get("Finalization Time (ns)"))
        if fin is not None and (self.finalize_ns is None or fin > self.finalize_ns):
            self.finalize_ns = int(fin)
        f = self.freq or 1000.0
        name = str(ev.get("name"))
        sid = self.scopes.setdefault(name, len(self.scopes))
        self.cols["cta"].append(cta)
        self.cols["warp"].append(tid[0])
        self.cols["line"].append(tid[1])
        self.cols["scope"].append(sid)
        self.start.append(round(ts * f))
        self.dur.append(round(dur * f))

    def _cta(self, pid: str, stack: tuple[str, ...]) -> int | None:
        m = _PID.match(pid)
        if m is None:
            return None
        k = self.kernels.setdefault(Kernel(m["kernel"], stack), len(self.kernels))
        return self.ctas.setdefault((k, int(m["core"] or -1), int(m["cta"])), len(self.ctas))


def _warp_line(tid: str) -> tuple[int, int] | None:
    m = _TID.match(tid)
    return (int(m["warp"]), int(m["line"] or 0)) if m else None


def _number(x: Any) -> float | None:
    """`x` as a finite number, or None."""
    if isinstance(x, (int, float)) and not isinstance(x, bool) and x == x and abs(x) != float("inf"):
        return float(x)
    return None


def read(path: str | Path, *, drops: Drops | None = None) -> ProtonTrace:
    """The trace's scope events as columns; BadReport (one line) for a file that is not a readable Proton trace,
    a truncated one, or one without a single scope. `drops`: what Proton said it lost (from the log of the run
    that wrote the trace; the file cannot say)."""
    import numpy as np

    p = Path(path)
    c = _Collect()
    try:
        with stream.open_text(p) as f:
            for ev in stream.events(stream.Stream(f), {}):
                c.add(ev)
    except stream.Truncated as e:
        raise BadReport(f"{p}: truncated Proton trace: the file ends inside {e.where} after {c.n_events} events "
                        "(was the program killed before proton.finalize() finished writing it?)") from None
    except stream.NotJSON as e:
        if e.offset == 0 and e.msg == "empty file":
            raise BadReport(f"{p}: empty Proton trace: Proton writes nothing when no launched kernel had a scope "
                            "(pl.scope / pl.enter_scope in @triton.jit code, after pl.enable_semantic('triton'))"
                            ) from None
        raise BadReport(f"{p}: not JSON: {e.msg} at character {e.offset}") from None
    except stream.NotTrace as e:
        raise BadReport(f"{p}: JSON, but not a Proton trace: {e}") from None
    except RecursionError:
        raise BadReport(f"{p}: JSON nested too deeply to be a Proton trace") from None
    except (EOFError, zlib.error, lzma.LZMAError, gzip.BadGzipFile) as e:
        raise BadReport(f"{p}: truncated or damaged compressed file after {c.n_events} events ({e})") from None
    except UnicodeDecodeError:
        raise BadReport(f"{p}: not a text (UTF-8) JSON file") from None
    if not c.cols["scope"]:
        what = (f"{c.n_events} events, none of them a scope of a Proton kernel (pid 'KERNEL CoreN CTAM')"
                if c.n_events else "no events")
        raise BadReport(f"{p}: no scopes in this Proton trace ({what}): the kernels had no pl.scope / "
                        "pl.enter_scope, or Proton's instrumentation was not on when they compiled")
    return ProtonTrace(
        path=str(p), kernels=list(c.kernels), scopes=list(c.scopes), ctas=list(c.ctas),
        cta=np.frombuffer(c.cols["cta"], dtype=np.int32), warp=np.frombuffer(c.cols["warp"], dtype=np.int32),
        line=np.frombuffer(c.cols["line"], dtype=np.int32), scope=np.frombuffer(c.cols["scope"], dtype=np.int32),
        start=np.frombuffer(c.start, dtype=np.int64), dur=np.frombuffer(c.dur, dtype=np.int64),
        freq_mhz=c.freq or 1000.0, skipped=c.skipped, finalize_ns=c.finalize_ns, drops=drops or Drops())
