"""Proton, Triton's own profiler, as a tool: its instrumentation backend records a timeline of named scopes
inside Triton kernels (``triton.profiler.language`` scopes in ``@triton.jit`` code). It lives in the Python that
runs the kernels -- the workload child, profctl.workloads.proton_run -- so "finding" it is asking that Python
what it has, and its options are that child's arguments.

Files in a run directory: ``<name>.chrome_trace`` (``--data trace``: the per-warp timeline) or ``<name>.hatchet``
(``--data tree``: cycles per scope), written by Proton when its session is finalized; Proton says on standard
error what did not fit its buffer (the run keeps that log).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from profctl import proc
from profctl.errors import ProfctlError, ToolFailed, ToolNotFound, UsageError

BUFFERS = ("shared", "global")
#: Proton's granularities (triton.profiler.mode); warp_group failed to compile with Triton 3.6 (tests/data/proton)
GRANULARITIES = ("warp", "warp_2", "warp_4", "warp_8", "warp_group", "warp_group_2", "warp_group_4",
                 "warp_group_8", "cta")
CLOCKS = (64, 32)
DATA = ("trace", "tree")
SUFFIX = {"trace": ".chrome_trace", "tree": ".hatchet"}
#: CTAs per launch whose timeline is kept by default (every CTA of two SMs at a 1,024-CTA grid on 132 SMs, and the
#: longest); the counts and totals are of every CTA (profctl.workloads.proton_ctas)
DEFAULT_CTAS = 16
#: what the child prints when Triton's compiler rejected the instrumented kernel
_COMPILE_FAILED = ("PassManager::run failed", "CompilationError")

#: asked of the child's Python: Triton's version and whether its Proton has what profctl proton uses
_PROBE = """
import json
out = {}
try:
    import triton
    out["triton"] = triton.__version__
    import triton.profiler as proton
    import triton.profiler.language as pl
    out["scopes"] = hasattr(pl, "enable_semantic") and hasattr(pl, "scope")
    out["mode"] = hasattr(getattr(proton, "mode", None), "Default")
except Exception as e:
    out["error"] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""


@dataclass(frozen=True)
class ProtonOptions:
    """How Proton records (its instrumentation mode) and what it writes. `buffer` None: Proton's own default
    (shared memory). `warps`: only these warps are recorded (selective sampling): more room in the buffer for
    each. `clock` 32: 32-bit clock reads (cheaper; wrap after ~2 s at 2 GHz)."""

    buffer: str | None = None
    buffer_size: int = 0
    warps: tuple[int, ...] = ()
    granularity: str = "warp"
    clock: int = 64
    time_shift: bool = False
    data: str = "trace"
    ctas: int | None = DEFAULT_CTAS  # None: every CTA

    def __post_init__(self) -> None:
        if self.buffer is not None and self.buffer not in BUFFERS:
            raise UsageError(f"--buffer {self.buffer!r}: choose {' or '.join(BUFFERS)}")
        if self.buffer_size < 0:
            raise UsageError(f"--buffer-size must be >= 0 bytes (0: Proton's default), got {self.buffer_size}")
        if self.granularity not in GRANULARITIES:
            raise UsageError(f"--granularity {self.granularity!r}: choose from {', '.join(GRANULARITIES)}")
        if self.clock not in CLOCKS:
            raise UsageError(f"--clock {self.clock}: choose 64 or 32 (bits)")
        if self.data not in DATA:
            raise UsageError(f"--data {self.data!r}: choose trace (the timeline) or tree (cycles per scope)")
        if self.ctas is not None and self.ctas <= 0:
            raise UsageError(f"--ctas {self.ctas}: a number of CTAs (> 0), or all")
        if any(w < 0 for w in self.warps):
            raise UsageError(f"--warps: warp ids are >= 0, got {','.join(map(str, self.warps))}")

    def argv(self, buffer_default: str = "shared") -> list[str]:
        """The workload child's options for this mode (profctl.workloads.proton_run)."""
        out = ["--buffer", self.buffer or buffer_default, "--granularity", self.granularity, "--clock",
               str(self.clock), "--data", self.data]
        if self.buffer_size:
            out += ["--buffer-size", str(self.buffer_size)]
        if self.warps:
            out += ["--warps", ",".join(map(str, self.warps))]
        if self.data == "trace":
            out += ["--ctas", "all" if self.ctas is None else str(self.ctas)]
        return out + (["--time-shift"] if self.time_shift else [])

    def describe(self, buffer_default: str = "shared") -> dict[str, object]:
        return {"buffer": self.buffer or buffer_default, "buffer_size": self.buffer_size or None,
                "warps": list(self.warps) or "all", "granularity": self.granularity, "clock_bits": self.clock,
                "time_shift": self.time_shift, "data": self.data,
                "ctas": ("all" if self.ctas is None else self.ctas) if self.data == "trace" else "all"}


def parse_warps(text: str | None) -> tuple[int, ...]:
    """``"0,4"`` -> (0, 4); UsageError for anything else."""
    if not text:
        return ()
    try:
        out = tuple(sorted({int(x) for x in text.split(",") if x.strip()}))
    except ValueError:
        raise UsageError(f"--warps {text!r}: a comma list of warp ids, e.g. 0,4") from None
    if not out:
        raise UsageError(f"--warps {text!r}: a comma list of warp ids, e.g. 0,4")
    return out


def parse_ctas(text: str | None) -> int | None:
    """``"all"`` -> None (every CTA), ``"16"`` -> 16; UsageError for anything else."""
    if text is None:
        return DEFAULT_CTAS
    t = text.strip().lower()
    if t == "all":
        return None
    if not t.isdigit() or int(t) <= 0:
        raise UsageError(f"--ctas {text!r}: a number of CTAs (> 0), or all")
    return int(t)


def output(base: Path, data: str) -> Path:
    """The file Proton writes for session name `base`."""
    return base.with_name(base.name + SUFFIX[data])


def check(python: str, timeout_s: float = 120.0) -> str:
    """Triton's version in `python` when its Proton can instrument Triton kernels; ToolNotFound when Triton or
    Proton is not there, ToolFailed when it is too old (no kernel scopes)."""
    try:
        text = proc.capture([python, "-c", _PROBE], timeout_s=timeout_s)
    except ProfctlError as e:
        raise ToolNotFound(f"cannot ask {python} about Triton's Proton: {e.one_line()}") from None
    try:
        got = json.loads(text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise ToolFailed(f"{python} did not say whether it has Proton: {text.strip()[-200:]!r}") from None
    version = got.get("triton")
    if version is None:
        raise ToolNotFound(f"Triton is not installed in {python} ({got.get('error')}): profctl proton needs "
                           "Triton's Proton (pip install triton)")
    if "error" in got:
        raise ToolNotFound(f"Proton (triton.profiler) cannot be imported with Triton {version}: {got['error']}")
    if not (got.get("scopes") and got.get("mode")):
        raise ToolFailed(f"Triton {version}'s Proton is too old for profctl proton: it has no kernel scopes "
                         "(triton.profiler.language.enable_semantic / scope) or no instrumentation modes; "
                         "Triton 3.6 was checked")
    return str(version)


def log_problem(text: str) -> str | None:
    """What the child's log says went wrong inside Proton, in one line, or None."""
    if any(p in text for p in _COMPILE_FAILED) and ("proton" in text.lower() or "make_llir" in text):
        return ("Triton could not compile the instrumented kernel (\"PassManager::run failed\"); with Triton 3.6 "
                "--granularity warp_group did this: try --granularity warp")
    return None
