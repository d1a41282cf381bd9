"""Nsight Compute (ncu): where it is, its version, the profile and export command lines, and how its failures
read (ERR_NVGPUCTRPERM, unknown metrics, nothing profiled).

`find()` and `version()` are also what ``profctl doctor`` reports.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from profctl import proc
from profctl.errors import CounterPermission, NothingMatched, ProfctlError, ToolFailed, ToolNotFound, UsageError
from profctl.fsutil import atomic_write_text

ENV = "PROFCTL_NCU"
CUDA_BIN = Path("/usr/local/cuda/bin/ncu")
NSIGHT_GLOB_ROOT = Path("/opt/nvidia/nsight-compute")

REPLAY_MODES = ("kernel", "application", "range", "app-range")
CLOCK_CONTROLS = ("base", "none", "reset")
CACHE_CONTROLS = ("all", "none")


def candidates() -> list[Path]:
    """Where ncu is looked for, in order: $PROFCTL_NCU, PATH, /usr/local/cuda/bin,
    /opt/nvidia/nsight-compute/*/
    (newest version first)."""
    out: list[Path] = []
    env = os.environ.get(ENV)
    if env:
        out.append(Path(env))
    w = shutil.which("ncu")
    if w:
        out.append(Path(w))
    out.append(CUDA_BIN)
    if NSIGHT_GLOB_ROOT.is_dir():
        dirs = sorted(
            (d for d in NSIGHT_GLOB_ROOT.iterdir() if d.is_dir()), key=lambda d: _vkey(d.name), reverse=True
        )
        out += [d / "ncu" for d in dirs]
    return out


def _vkey(s: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", s)) or (0,)


def find() -> Path:
    """The ncu executable; ToolNotFound (one line saying where we looked) when there is none.

    $PROFCTL_NCU, when set, must point at an executable: it is never silently skipped.
    """
    env = os.environ.get(ENV)
    if env:
        p = Path(env)
        if p.is_file() and os.access(p, os.X_OK):
            return p
        raise ToolNotFound(f"{ENV}={env} is not an executable file")
    for p in candidates():
        if p.is_file() and os.access(p, os.X_OK):
            return p
    raise ToolNotFound(
        "ncu (Nsight Compute) not found: looked in $PROFCTL_NCU, PATH, /usr/local/cuda/bin and "
        "/opt/nvidia/nsight-compute/*/; install Nsight Compute or set PROFCTL_NCU=/path/to/ncu"
    )


_VERSION = re.compile(r"Version\s+(\d{4}\.\d+(?:\.\d+)*)")


def version(exe: Path | None = None) -> str:
    """ncu's version, e.g. '2025.3.1.0' (from ``ncu --version``)."""
    exe = exe or find()
    out = proc.capture([str(exe), "--version"], timeout_s=60)
    m = _VERSION.search(out)
    if not m:
        raise ToolFailed(f"{exe} --version printed no version: {out.strip()[:200]!r}")
    return m.group(1)


# ------------------------------------------------------------ profile argv
@dataclass(frozen=True)
class ProfileOptions:
    """What one ncu run collects and which launches it profiles."""

    metrics: tuple[str, ...] = ()
    sections: tuple[str, ...] = ()
    set_name: str | None = None
    nvtx_include: tuple[str, ...] = ()
    kernel_regex: str | None = None
    launch_count: int | None = None
    launch_skip: int | None = None
    replay_mode: str | None = None
    clock_control: str | None = None
    cache_control: str | None = None
    import_source: bool = False  # embed the kernels' source files (the source view's text)
    once: bool = False  # each distinct kernel (by function name) once: its first launch (--kernel-id)
    extra: tuple[str, ...] = field(default_factory=tuple)


def profile_argv(exe: Path, report: Path, opts: ProfileOptions, target: Sequence[str]) -> list[str]:
    """``ncu ... -o REPORT <target argv>``. ncu's own defaults are kept where an option is None."""
    argv = [str(exe), "--config-file", "off", "--force-overwrite", "--export", str(report)]
    if opts.set_name:
        argv += ["--set", opts.set_name]
    for s in opts.sections:
        argv += ["--section", s]
    if opts.metrics:
        argv += ["--metrics", ",".join(opts.metrics)]
    if opts.nvtx_include:
        argv.append("--nvtx")
        for f in opts.nvtx_include:
            argv += ["--nvtx-include", f]
    if opts.once:  # context:stream:name:invocation -- the first invocation of every kernel the regex names
        argv += ["--kernel-id", once_id(opts.kernel_regex)]
    elif opts.kernel_regex:
        k = opts.kernel_regex
        argv += ["--kernel-name", k if k.startswith("regex:") else f"regex:{k}"]
    if opts.launch_skip is not None:
        argv += ["--launch-skip", str(opts.launch_skip)]
    if opts.launch_count is not None:
        argv += ["--launch-count", str(opts.launch_count)]
    if opts.replay_mode:
        argv += ["--replay-mode", opts.replay_mode]
    if opts.clock_control:
        argv += ["--clock-control", opts.clock_control]
    if opts.cache_control:
        argv += ["--cache-control", opts.cache_control]
    if opts.import_source:
        argv += ["--import-source", "yes"]
    argv += list(opts.extra)
    return argv + list(target)


def once_id(kernel_regex: str | None) -> str:
    """ncu's ``--kernel-id`` for the first invocation of each kernel (by function name) whose name matches
    `kernel_regex` (every kernel: None): ``::regex:<re>:1`` -- ncu counts invocations per kernel name. ncu splits
    the identifier at ':', so a regex with one cannot be given (UsageError)."""
    k = (kernel_regex or ".*").removeprefix("regex:")
    if ":" in k:
        raise UsageError(f"--once with --kernel {kernel_regex!r}: ncu's kernel identifier cannot hold a ':' "
                         "(name a kernel by its function name, without namespaces)")
    return f"::regex:{k}:1"


def export_argv(exe: Path, report: Path, page: str = "raw") -> list[str]:
    """``ncu --import REPORT --csv --page raw --print-units base`` (NVTX columns included when recorded)."""
    return [str(exe), "--import", str(report), "--csv", "--page", page, "--print-units", "base"]


def export_csv(exe: Path, report: Path, out: Path, page: str = "raw", timeout_s: float = 600.0) -> Path:
    """Export one page of a report as CSV into `out` (atomically)."""
    text = proc.capture(export_argv(exe, report, page), timeout_s=timeout_s)
    return atomic_write_text(out, text)


# ------------------------------------------------------------ failures
PERM_RE = re.compile(r"ERR_NVGPUCTRPERM")
NOTHING_RE = re.compile(r"No kernels were profiled", re.I)
_METRIC_TOKEN = re.compile(r"(?:breakdown:)?[a-z][a-z0-9]*__[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*")
_ERROR_LINE = re.compile(r"^==ERROR==\s*(.*)$", re.M)


@dataclass(frozen=True)
class Failure:
    """What an ncu log says went wrong (kind: permission, metric, nothing, error), with ncu's own words."""

    kind: str
    message: str
    metrics: tuple[str, ...] = ()


def diagnose_log(text: str, rc: int) -> Failure | None:
    """Read ncu's output: counter permission, unknown metrics, no kernel profiled, or another ==ERROR==.

    ERR_NVGPUCTRPERM comes first because some ncu versions report it with exit status 0.
    """
    errors = [e.strip() for e in _ERROR_LINE.findall(text)]
    if PERM_RE.search(text):
        line = next((e for e in errors if "ERR_NVGPUCTRPERM" in e), "ERR_NVGPUCTRPERM")
        return Failure("permission", _first_sentence(line))
    bad = [
        e
        for e in errors
        if "metric" in e.lower()
        and (
            "fail" in e.lower()
            or "invalid" in e.lower()
            or "unknown" in e.lower()
            or "not found" in e.lower()
        )
    ]
    if bad:
        names: list[str] = []
        for e in bad:
            names += [t for t in _METRIC_TOKEN.findall(e) if t not in names]
        return Failure("metric", bad[0], tuple(names))
    if errors and rc != 0:
        return Failure("error", errors[-1])
    if NOTHING_RE.search(text):
        return Failure("nothing", "ncu: No kernels were profiled")
    if rc != 0:
        tail = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("$ ")]
        return Failure("error", tail[-1][:300] if tail else f"exit status {rc}")
    return None


def _first_sentence(s: str) -> str:
    s = s.strip()
    cut = s.find(". ")
    return s[: cut + 1] if 0 < cut < 240 else s[:240]


def failure_error(f: Failure, *, log: Path, why_nothing: str = "") -> ProfctlError:
    """The typed, one-line error for a Failure."""
    if f.kind == "permission":
        return CounterPermission(
            f"ncu cannot read the GPU performance counters ({f.message})",
            log=log,
            hint=CounterPermission.HINT,
        )
    if f.kind == "nothing":
        return NothingMatched(
            f"ncu profiled no kernel: {why_nothing or 'the filters matched no launch'}", log=log
        )
    if f.kind == "metric":
        return ToolFailed(f"ncu rejected a metric: {f.message}", log=log)
    return ToolFailed(f"ncu failed: {f.message}", log=log)


# ------------------------------------------------------------ progress
_PROFILING = re.compile(r'==PROF== Profiling "(?P<name>.*?)"(?: - (?P<id>\d+))?:?(?P<rest>.*)$')
_PASSES = re.compile(r"- (\d+) pass")


@dataclass(frozen=True)
class Profiled:
    """One launch ncu finished profiling, read from its progress line: the kernel's name, ncu's launch number,
    its replay passes and about how long it took (from the line's first sight to its end: the poll's resolution)."""

    name: str
    id: int | None
    passes: int | None
    seconds: float


class ProgressReader:
    """ncu's progress lines (``==PROF== Profiling "name" - N: 0%....50%....100% - K passes``) read as ncu writes
    them: feed what the log grew by and when; each call returns the launches finished since, and `current` is
    the launch being profiled now (name, when first seen)."""

    def __init__(self) -> None:
        self._buf = ""
        self.current: tuple[str, float] | None = None
        self._last_end: float | None = None
        #: when ncu said it connected to the program, and when the first and last profiled launch ended
        self.connected: float | None = None
        self.first_end: float | None = None

    def feed(self, text: str, now: float) -> list[Profiled]:
        self._buf += text
        *lines, self._buf = self._buf.split("\n")
        out = [p for ln in lines if (p := self._line(ln, now, complete=True)) is not None]
        if self._buf:
            self._line(self._buf, now, complete=False)
        return out

    @property
    def last_end(self) -> float | None:
        return self._last_end

    def _line(self, line: str, now: float, *, complete: bool) -> Profiled | None:
        m = _PROFILING.search(line)
        if m is None:
            if self.connected is None and "==PROF== Connected" in line:
                self.connected = now
            return None
        name = m.group("name")
        if self.current is None or self.current[0] != name:
            self.current = (name, now if not complete or self._last_end is None else self._last_end)
        if not complete:
            return None
        passes = _PASSES.search(m.group("rest"))
        start = self.current[1]
        self.current, self._last_end = None, now
        self.first_end = self.first_end or now
        return Profiled(name, int(m.group("id")) if m.group("id") else None,
                        int(passes.group(1)) if passes else None, max(0.0, now - start))


#: launches profiled before profctl says how to narrow a run that profiles the same kernels again and again
ADVISE_AFTER = 20


def narrowing_advice(counts: dict[str, int], *, recipe: str, seconds: float, once: bool, kernel: str | None,
                     range_: str | None, launch_count: int | None, program: bool) -> str | None:
    """What to say when ncu profiles far more launches than the recipe needs (one of each kernel): `counts` per
    kernel name so far, `seconds` per launch on average; None while it does not (fewer than ADVISE_AFTER launches,
    or as many kernels as launches give or take a third, or --once already)."""
    total, distinct = sum(counts.values()), len(counts)
    if once or launch_count is not None or total < ADVISE_AFTER or total < 1.5 * distinct:
        return None
    top = sorted(counts.items(), key=lambda kv: -kv[1])[:3]
    seen = ", ".join(f"{_short(n)} x{c}" for n, c in top) + (" ..." if distinct > 3 else "")
    ways = [f"--once (each of the {distinct} kernel{'s' if distinct != 1 else ''} once: its first launch)"]
    if kernel is None:
        ways.append("--kernel REGEX (the kernels that matter)")
    ways.append(f"--launch-count N{' with --launch-skip N' if kernel is None else ''} (how many)")
    if program and range_ is None:
        ways.append("--range NAME (an NVTX range around the call that matters, e.g. after an autotuner settled)")
    return (f"ncu has profiled {total} launches of {distinct} kernel{'s' if distinct != 1 else ''} so far "
            f"({seen}; about {seconds:.1f} s each) and goes on while the program launches; the {recipe} recipe "
            f"needs one launch of each kernel. Narrow it: {'; '.join(ways)}. Ctrl-C stops it (the launches "
            "profiled so far are lost)")


def _short(name: str, width: int = 40) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."


# ------------------------------------------------------------ reading, ready before the report is
#: a tiny report (one small kernel, recorded on an H200 with plain ncu: profctl/tools/README.md) whose only use is
#: to make ncu_report do its one-time start while ncu runs
WARM_REPORT = Path(__file__).with_name("ncu_warm.ncu-rep")


def warm_reader(report: Path | None = None) -> bool:
    """ncu_report's first SASS lookup in a process costs 0.3-1 s (a one-time start inside the module, whatever
    the report); done here on `report` (default: WARM_REPORT), e.g. in a thread while ncu runs, the report ncu
    writes is read without it. False when there is nothing to do it with (no module, no report)."""
    path = report or WARM_REPORT
    if not path.is_file():
        return False
    try:
        import ncu_report as mod

        ctx = mod.load_report(str(path))
        for ri in range(ctx.num_ranges()):
            rng = ctx.range_by_idx(ri)
            for ai in range(rng.num_actions()):
                a = rng.action_by_idx(ai)
                for name in ("inst_executed", "smsp__pcsamp_sample_count"):  # counted per instruction address
                    m = a.metric_by_name(name)
                    if m is not None and m.has_correlation_ids() and m.num_instances():
                        return bool(a.sass_by_pc(int(m.correlation_ids().as_uint64(0))))
    except Exception:
        return False
    return False
