"""Memory a point needs and memory the machine has, so that a point that cannot fit is an ``oom`` row before it
allocates anything (not an allocator error, not a process the kernel kills), and a point that ran reports the
host memory it held where no GPU counter exists.

Pure standard library (the workload child imports it before torch allocates; profctl's parent reads the same
numbers): the attention workload's estimate from its shape, the host memory a new allocation can get (the least of
/proc/meminfo's MemAvailable, a cgroup's limit and an address-space limit), and the process's peak resident
memory over a stretch of its life (Linux: ``/proc/self/clear_refs`` resets VmHWM)."""

from __future__ import annotations

import resource
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GIB = 2**30
#: bytes per element of the workload's dtypes
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
#: backends that hold the whole seqlen_q x seqlen_kv score matrix (profctl's eager baseline, SDPA's math path)
DENSE = ("eager", "sdpa-math")


@dataclass(frozen=True)
class Budget:
    """Bytes a new allocation can get, and what bounds them (said in an oom row's reason)."""

    bytes: int
    what: str


def attention_estimate(spec: Any, *, check: bool = True) -> dict[str, int]:
    """Bytes one point of the attention workload needs at its peak, by part (sum them for the total): inputs and
    the output (and gradients and the output gradient for a backward pass), the float64 reference of the check,
    and for the backends that hold it the score matrix (two in flight forward, four with a backward pass). Meant
    to be a little low (allocator rounding, workspaces and library buffers are not counted), so that it refuses
    only points that cannot fit."""
    e = DTYPE_BYTES.get(spec.dtype, 4)
    q = spec.batch * spec.heads * spec.seqlen_q * spec.head_dim
    kv = spec.batch * spec.kv_heads * spec.seqlen_kv * spec.head_dim
    bwd = spec.pass_ != "fwd"
    parts = {"inputs": (q + 2 * kv) * e, "output": q * e}
    if bwd:
        parts["gradients"] = (2 * q + 2 * kv) * e  # dq, dk, dv and the output gradient
    if check:  # the float64 reference and the output in float64; the reference's (seqlen_q x seqlen_kv) scores
        # of one (batch, head) slice, two in flight (scores and their softmax)
        parts["check"] = 2 * q * 8 + 2 * spec.seqlen_q * spec.seqlen_kv * 8
    if getattr(spec, "backend", None) in DENSE:
        scores = spec.batch * spec.heads * spec.seqlen_q * spec.seqlen_kv * e
        parts["scores"] = scores * (4 if bwd else 2)
    return parts


def describe(parts: dict[str, int], total: int | None = None) -> str:
    """``1.50 GiB (inputs 0.25, output 0.25, scores 1.00)``: the total (default: the parts' sum) and its parts."""
    total = sum(parts.values()) if total is None else total
    unit, scale = _unit(total)
    inner = ", ".join(f"{k} {v / scale:.2f}" for k, v in parts.items() if v)
    return f"{total / scale:.2f} {unit} ({inner})"


def _unit(n: int | float) -> tuple[str, int]:
    """The unit an amount of memory reads in with two decimals and not as 0.00 (`--memory-limit 0.001` is 1 MiB,
    not "0.00 GiB"): GiB from a hundredth of one, else MiB, else KiB."""
    if n >= GIB / 100:
        return "GiB", GIB
    return ("MiB", 2**20) if n >= 2**20 / 10 else ("KiB", 2**10)


def amount(n: int | float) -> str:
    """``1.50 GiB``, ``1.00 MiB``: an amount of memory in the unit :func:`_unit` picks."""
    unit, scale = _unit(n)
    return f"{n / scale:.2f} {unit}"


def refusal(need: dict[str, int], have: Budget | None, total: int | None = None) -> str | None:
    """Why a point that needs `need` (by part; `total`, default their sum) cannot run within `have`, or None when
    it fits (or nothing is known)."""
    total = sum(need.values()) if total is None else total
    if have is None or total <= have.bytes:
        return None
    hint = "; --no-check leaves the float64 reference out" if max(need, key=lambda k: need[k]) == "check" else ""
    return (f"refused before allocating: it needs about {describe(need, total)} of memory, more than the "
            f"{amount(have.bytes)} {have.what}{hint}")


def host_budget(limit_gib: float | None = None) -> Budget | None:
    """What a new host allocation can get now: the least of MemAvailable, the cgroup's limit less its use, an
    address-space limit (ulimit -v) less what the process maps, and `limit_gib` (--memory-limit). None when
    nothing is known (no /proc)."""
    found: list[Budget] = []
    avail = _meminfo("MemAvailable")
    if avail is not None:
        found.append(Budget(avail, "of host memory available"))
    cg = _cgroup_free()
    if cg is not None:
        found.append(Budget(cg, "left under this process's cgroup memory limit"))
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        mapped = _status("VmSize") or 0
        found.append(Budget(max(0, soft - mapped), "left under the address-space limit (ulimit -v)"))
    if limit_gib is not None:
        found.append(Budget(int(limit_gib * GIB), "of --memory-limit"))
    return min(found, key=lambda b: b.bytes) if found else None


def reset_peak() -> bool:
    """Start measuring this process's peak resident memory afresh (Linux: VmHWM back to the current RSS);
    False where it cannot (then peak() is not of the stretch since)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak() -> int | None:
    """This process's peak resident memory (bytes) since reset_peak(): VmHWM."""
    return _status("VmHWM")


def _status(field: str) -> int | None:
    return _kib_field(Path("/proc/self/status"), field)


def _meminfo(field: str) -> int | None:
    return _kib_field(Path("/proc/meminfo"), field)


def _kib_field(path: Path, field: str) -> int | None:
    try:
        for line in path.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_free() -> int | None:
    """The memory left under this process's cgroup limit (v2: memory.max, v1: memory.limit_in_bytes), None
    without one."""
    for limit_f, use_f in (("memory.max", "memory.current"), ("memory/memory.limit_in_bytes",
                                                               "memory/memory.usage_in_bytes")):
        root = Path("/sys/fs/cgroup")
        try:
            limit = (root / limit_f).read_text().strip()
            if limit == "max" or int(limit) >= 1 << 60:
                continue
            return max(0, int(limit) - int((root / use_f).read_text().strip()))
        except (OSError, ValueError):
            continue
    return None


def killed_for_memory(memory: dict[str, Any] | None) -> str | None:
    """For a child killed by SIGKILL (not by profctl) during a point: the reason of an ``oom`` row when the point
    was big for the memory it had (its estimate at least half of it: the kernel's out-of-memory killer, or a
    cgroup's), else None. `memory`: what the child's start event said of the point (estimate, budget)."""
    if not isinstance(memory, dict):
        return None
    need, have = memory.get("estimate_bytes"), memory.get("available_bytes")
    if not isinstance(need, int) or not isinstance(have, int) or have <= 0 or need < have / 2:
        return None
    return (f"killed by the system (SIGKILL) during this point: out of memory; its estimate is {amount(need)} "
            f"of the {amount(have)} {memory.get('available_what') or 'available'} when it started (smaller "
            "shapes, or --memory-limit to refuse such points before they run)")
