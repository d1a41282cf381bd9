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

from profctl.errors import CounterPermission, NothingMatched, ProfctlError, ToolFailed, ToolNotFound

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
    from profctl import proc

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
    if opts.kernel_regex:
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


def export_argv(exe: Path, report: Path, page: str = "raw") -> list[str]:
    """``ncu --import REPORT --csv --page raw --print-units base`` (NVTX columns included when recorded)."""
    return [str(exe), "--import", str(report), "--csv", "--page", page, "--print-units", "base"]


def export_csv(exe: Path, report: Path, out: Path, page: str = "raw", timeout_s: float = 600.0) -> Path:
    """Export one page of a report as CSV into `out` (atomically)."""
    from profctl import proc
    from profctl.fsutil import atomic_write_text

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
