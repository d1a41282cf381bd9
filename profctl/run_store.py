"""Run directories: every profiling or bench command writes ``reports/<run-id>/`` with a manifest, the tools'
raw outputs and logs, and the summaries. The id sorts by time and never collides between concurrent runs.

The manifest (``manifest.json``, rewritten atomically; one writer per run) says what ran and on what: the
command line, each external tool's argv and version, the software versions that change kernel times (PyTorch,
CUDA, flash-attn, FA4), the GPU and driver, the git revision of the code under test, start and end, and a
status: ``running`` -> ``complete`` | ``incomplete`` (interrupted: Ctrl-C, SIGTERM, a timeout; every finished
point is kept) | ``failed``. A run whose process died without saying so (SIGKILL, the OOM killer) still reads
``running`` on disk; :func:`effective_status` reports it as ``incomplete`` once its process is gone.

How a command joins the store (see docs/runs-and-compare.md)::

    run_dir = runs.new_run("nsys", root=reports, argv=["profctl", *sys.argv[1:]], extra={"workload": ...})
    with runs.recording(run_dir):           # complete / incomplete (KeyboardInterrupt, SIGTERM) / failed
        runs.record_tool(run_dir, "nsys", argv, version="2025.3.1", log=log)
        ...                                  # write raw outputs, logs and summary.json into run_dir
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import importlib.util
import json
import os
import platform
import re
import secrets
import shlex
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profctl import machine_state, proc
from profctl._version import __version__
from profctl.errors import BadReport, CannotStartRun, ProfctlError, UsageError
from profctl.fsutil import atomic_write_json, why
from profctl.nvml import THROTTLE_REASONS
from profctl.schema.bench import bench_rows

MANIFEST = "manifest.json"
#: environment variables a run records in its manifest (``env``): they change what runs or how fast, and a repro
#: script (profctl show RUN --repro) sets them again
ENV_OF_INTEREST = ("CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING", "CUDA_MODULE_LOADING", "NVIDIA_TF32_OVERRIDE",
                   "OMP_NUM_THREADS", "MKL_NUM_THREADS")
ENV_PREFIXES = ("PYTORCH_", "TORCH_", "NCCL_", "CUBLAS_", "CUDNN_", "TRITON_", "PROFCTL_")
#: ... except these, which say where things are on the machine that ran (a tool's path, the run store)
ENV_NOT_OF_INTEREST = ("PROFCTL_NSYS", "PROFCTL_NCU", "PROFCTL_REPORTS")
STATUSES = ("running", "complete", "incomplete", "failed")
_manifest_lock = threading.Lock()
#: (time made, path) of every run directory this process made: what an interrupted command names (made_since)
_MADE: list[tuple[float, Path]] = []


def made_since(t0: float) -> list[Path]:
    """The run directories this process made at or after `t0` (time.time()), oldest first."""
    return [p for t, p in _MADE if t >= t0]


def reports_root(root: Path | str | None = None) -> Path:
    """`root`, else $PROFCTL_REPORTS, else ./reports."""
    return Path(root or os.environ.get("PROFCTL_REPORTS") or "reports")


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


def new_run(kind: str, *, root: Path | str | None = None, argv: list[str] | None = None,
            extra: dict[str, Any] | None = None, env: bool = True, label: str | None = None) -> Path:
    """Create a fresh run directory and its manifest (status 'running'), with the environment when `env`."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", kind):
        raise ValueError(f"run kind {kind!r}: letters, digits, '_', '.', '-' only")
    base = reports_root(root)
    now = _now()
    try:
        base.mkdir(parents=True, exist_ok=True)
        for _ in range(100):
            run_id = f"{now:%Y%m%dT%H%M%SZ}-{kind}-{secrets.token_hex(3)}"
            path = base / run_id
            try:
                path.mkdir()  # atomic: two runs never get the same directory
                break
            except FileExistsError:
                continue
        else:  # pragma: no cover
            raise RuntimeError("could not create a unique run directory")
    except OSError as e:
        raise CannotStartRun(f"cannot create a run directory under {base}: {why(e)}",
                          hint="pass --reports DIR (or set PROFCTL_REPORTS) to a folder you can write") from None

    _MADE.append((time.time(), path))

    manifest: dict[str, Any] = {
        "run_id": run_id, "kind": kind, "status": "running", "label": label,
        "command": list(argv) if argv is not None else list(sys.argv),
        "cwd": os.getcwd(), "started": now.isoformat(), "ended": None,
        "host": platform.node(), "pid": os.getpid(), "python": platform.python_version(), "profctl": __version__,
        "tools": [],
    }
    if env:
        manifest["environment"] = environment()
        manifest["git"] = git_revision()
        manifest["env"] = env_of_interest()
        manifest["machine"] = machine_state.at_start()
    manifest.update(extra or {})
    atomic_write_json(path / MANIFEST, manifest)
    return path


def read_manifest(run_dir: Path | str) -> dict[str, Any]:
    """The manifest as stored; BadReport when it is missing or unreadable."""
    p = Path(run_dir) / MANIFEST
    try:
        m = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadReport(f"{run_dir}: no {MANIFEST}: not a profctl run directory") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BadReport(f"{p}: unreadable manifest ({e})") from None
    if not isinstance(m, dict):
        raise BadReport(f"{p}: not a manifest (a JSON object was expected)")
    return normalize_manifest(m)


#: the type every reader of the run store may rely on, per manifest field (other versions of profctl, other
#: commands and hand-edited files write other things: :func:`normalize_manifest` makes them fit)
_TEXT = ("run_id", "kind", "status", "label", "cwd", "started", "ended", "host", "python", "profctl", "reason")
_INT = ("pid", "points", "rows", "launches", "returncode")
_MAPPING = ("environment", "git", "device", "clocks", "workload", "labels", "env", "machine")


def normalize_manifest(m: dict[str, Any]) -> dict[str, Any]:
    """The manifest with every field the run store reads in the type it expects: text as str, counts as int,
    ``environment``/``git``/``device``/``clocks``/``workload``/``labels`` as mappings (a device given as a
    string, as ``profctl torch`` before 0.2 wrote it, becomes ``{"name": ...}``), ``command`` and ``tools`` as
    lists. What cannot be made to fit is dropped (None), never guessed; the rest is kept as stored."""
    out = dict(m)
    for k in _TEXT:
        v = out.get(k)
        if v is not None and not isinstance(v, str):
            out[k] = None if isinstance(v, (dict, list)) else str(v)
    for k in _INT:
        v = out.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            try:
                out[k] = int(v)
            except (TypeError, ValueError):
                out[k] = None
    for k in _MAPPING:
        v = out.get(k)
        if v is None or isinstance(v, dict):
            continue
        out[k] = {"name": str(v)} if k == "device" and isinstance(v, (str, int, float)) and v != "" else \
            ({"commit": v} if k == "git" and isinstance(v, str) and v else None)
    for k in ("git", "labels"):  # may be absent, never another type
        if isinstance(out.get(k), dict) and not out[k]:
            out[k] = None
    git = out.get("git")
    if git is not None and git.get("commit") is not None and not isinstance(git["commit"], str):
        out["git"] = dict(git, commit=str(git["commit"]))
    clocks = out.get("clocks")
    if clocks:
        out["clocks"] = dict(clocks, **{k: [str(x) for x in v] if isinstance(v, list) else ([str(v)] if v else [])
                                        for k in ("throttle_reasons", "clock_warnings") if k in clocks
                                        for v in [clocks[k]]})
    out["command"] = _as_argv(out.get("command"))
    tools = out.get("tools")
    tools = [tools] if isinstance(tools, dict) else tools if isinstance(tools, list) else []
    out["tools"] = [dict(t, argv=_as_argv(t.get("argv"))) for t in tools if isinstance(t, dict)]
    if "warnings" in out and not isinstance(out["warnings"], list):
        out["warnings"] = [str(out["warnings"])] if out["warnings"] else []
    return out


#: the versions a manifest may record (torch and cuda as the workload child reported them, on its device event)
VERSION_KEYS = ("torch", "cuda", "flash_attn", "fa4", "cutlass_dsl")


@dataclass(frozen=True)
class WorkloadFacts:
    """What a run's workload did that changes its times (manifest ``workload``)."""

    flush_l2: bool = False
    nvtx: Any = None
    warmup: Any = None


@dataclass(frozen=True)
class Manifest:
    """A run's manifest.json, typed for what its readers ask of it (comparing two runs, reading a run's inputs);
    `raw` is the whole normalized manifest (:func:`normalize_manifest`) for the rest."""

    raw: dict[str, Any] = field(default_factory=dict)
    run_id: str | None = None
    kind: str | None = None
    label: str | None = None
    commit: str | None = None  # git.commit
    gpu: str | None = None  # the device's name, else NVML's, else the environment's GPU; never "cpu"
    driver: str | None = None  # the environment's driver, else the device's
    versions: dict[str, str] = field(default_factory=dict)  # VERSION_KEYS: the workload child's, else the parent's
    workload: WorkloadFacts | None = None  # None when the run recorded no workload
    device: dict[str, Any] = field(default_factory=dict)  # the device event as recorded
    program: list[str] = field(default_factory=list)  # a user's program's argv
    machine: dict[str, Any] = field(default_factory=dict)  # the machine's state (profctl.machine_state)

    @classmethod
    def from_dict(cls, m: dict[str, Any]) -> Manifest:
        n = normalize_manifest(m) if m else {}
        dev, env = n.get("device") or {}, n.get("environment") or {}
        gpu = next((str(c) for c in (dev.get("name"), dev.get("nvml_name"), env.get("gpu")) if c and c != "cpu"),
                   None)
        versions = {}
        for key in VERSION_KEYS:
            v = dev.get(key) if key in ("torch", "cuda") else None
            if v or env.get(key):
                versions[key] = str(v) if v else str(env[key])
        wl = n.get("workload") or {}
        prog = n.get("program")
        return cls(raw=n, run_id=n.get("run_id"), kind=n.get("kind"), label=n.get("label"),
                   commit=(n.get("git") or {}).get("commit"), gpu=gpu,
                   driver=env.get("driver") or dev.get("driver") or None, versions=versions,
                   workload=WorkloadFacts(flush_l2=bool(wl.get("flush_l2")), nvtx=wl.get("nvtx"),
                                          warmup=wl.get("warmup")) if wl else None,
                   device=dict(dev), program=_as_argv(prog.get("argv")) if isinstance(prog, dict) else [],
                   machine=dict(n.get("machine") or {}))


def _as_argv(v: Any) -> list[str]:
    if isinstance(v, list):
        return [str(x) for x in v]
    if isinstance(v, str) and v:
        try:
            return shlex.split(v)
        except ValueError:
            return v.split()
    return []


def update_manifest(run_dir: Path, **fields: Any) -> dict[str, Any]:
    """Merge `fields` into the manifest and rewrite it atomically (readers never see half a file)."""
    p = Path(run_dir) / MANIFEST
    with _manifest_lock:
        m = json.loads(p.read_text(encoding="utf-8")) if p.exists() else {}
        m.update(fields)
        atomic_write_json(p, m)
    return m


def record_tool(run_dir: Path, name: str, argv: list[str] | tuple[str, ...], *, version: str | None = None,
                log: Path | str | None = None, **more: Any) -> None:
    """Add one external tool invocation (its argv, version and log) to the manifest's `tools` list."""
    p = Path(run_dir) / MANIFEST
    entry = {"name": name, "argv": [str(a) for a in argv], "version": version,
             "log": str(log) if log is not None else None, "started": _now().isoformat(), **more}
    with _manifest_lock:
        m = json.loads(p.read_text(encoding="utf-8")) if p.exists() else {}
        m.setdefault("tools", []).append(entry)
        atomic_write_json(p, m)


def finish(run_dir: Path, status: str, **fields: Any) -> dict[str, Any]:
    """Mark a run complete, failed or incomplete (interrupted), with its end time."""
    if status not in STATUSES:
        raise ValueError(f"status {status!r} is not one of {', '.join(STATUSES)}")
    if "machine" not in fields:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            m = json.loads((Path(run_dir) / MANIFEST).read_text(encoding="utf-8"))
            machine = machine_state.finished(m.get("machine"), fields.get("device") or m.get("device"))
            if machine is not None:
                fields["machine"] = machine
    return update_manifest(run_dir, status=status, ended=_now().isoformat(), **fields)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While active, SIGTERM (a CI job cancelled, `timeout`, `kill`) raises KeyboardInterrupt like Ctrl-C, so the
    interrupted path (keep finished points, mark the run incomplete) runs. Main thread only; a no-op elsewhere."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        old = signal.signal(signal.SIGTERM, handler)
    except (ValueError, OSError):  # pragma: no cover - not settable here
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextlib.contextmanager
def recording(run_dir: Path, **fields: Any) -> Iterator[Path]:
    """Finish the run when the block ends: 'complete' when it returns, 'incomplete' on KeyboardInterrupt or
    SIGTERM (re-raised), 'failed' with the error's one line on any other exception (re-raised). A block that
    already called :func:`finish` keeps its status."""
    try:
        with sigterm_as_interrupt():
            yield run_dir
    except KeyboardInterrupt:
        _finish_once(run_dir, "incomplete", reason="interrupted", **fields)
        raise
    except BaseException as e:
        msg = e.one_line() if isinstance(e, ProfctlError) else f"{type(e).__name__}: {e}"
        _finish_once(run_dir, "incomplete" if isinstance(e, SystemExit) else "failed", reason=msg, **fields)
        raise
    else:
        _finish_once(run_dir, "complete", **fields)


def _finish_once(run_dir: Path, status: str, **fields: Any) -> None:
    try:
        if read_manifest(run_dir).get("status") != "running":
            return
        finish(run_dir, status, **fields)
    except Exception:  # never hide the original error behind a manifest problem
        pass


# ------------------------------------------------------------------------------------------- workload events
def read_events(path: Path | str) -> list[dict[str, Any]]:
    """Every event a workload wrote to its JSON-lines file (``device``, ``start``, ``row``); a torn last line (a
    killed child) and anything unreadable are skipped; a missing file is no events."""
    return EventTail(Path(path)).read(final=True)


class EventTail:
    """Follows a workload's JSON-lines file while it is written: each :meth:`read` returns the complete lines
    added since the last one (a line still being written waits for the next call)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def read(self, *, final: bool = False) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        end = len(data) if final else data.rfind(b"\n") + 1
        out = []
        for line in data[:end].splitlines():
            try:
                ev = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            if isinstance(ev, dict):
                out.append(ev)
        self.offset += end
        return out


def rows_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e.get("event") == "row"]


def device_of(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The workload's device event (GPU name, capability, torch and CUDA versions), without the event tag."""
    for e in events:
        if e.get("event") == "device":
            return {k: v for k, v in e.items() if k != "event"}
    return {}


# ------------------------------------------------------------------------------------------- the environment
def env_of_interest(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment variables of this process that change what a run does (:data:`ENV_OF_INTEREST`,
    :data:`ENV_PREFIXES`), sorted by name."""
    e = os.environ if environ is None else environ
    return {k: e[k] for k in sorted(e) if (k in ENV_OF_INTEREST or k.startswith(ENV_PREFIXES))
            and k not in ENV_NOT_OF_INTEREST}


def environment() -> dict[str, Any]:
    """Versions and the GPU, gathered cheaply: package metadata (no import of torch), torch's version.py for
    its CUDA version, NVML for the GPU name, driver and clocks. SM count comes from torch only when this process
    already initialised CUDA; commands that run a workload child add it from the child's device event."""
    env: dict[str, Any] = {
        "platform": platform.platform(),
        "torch": _dist_version("torch"),
        "cuda": torch_cuda_version(),
        "flash_attn": _dist_version("flash-attn", "flash_attn"),
        "fa4": _dist_version("flash-attn-4", "flash_attn_4"),
        "cutlass_dsl": _dist_version("nvidia-cutlass-dsl"),
        "triton": _dist_version("triton"),
    }
    env.update(_nvml_info())
    if "torch" in sys.modules:
        try:
            torch = sys.modules["torch"]
            if torch.cuda.is_initialized():
                props = torch.cuda.get_device_properties(0)
                env["sm_count"] = props.multi_processor_count
                env.setdefault("gpu", props.name)
        except Exception:
            pass
    return env


def _dist_version(*names: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version  # 10-15 ms (email, zipfile): only for the manifest
    for n in names:
        try:
            return version(n)
        except PackageNotFoundError:
            continue
        except Exception:  # pragma: no cover - a broken install
            continue
    return None


def torch_cuda_version() -> str | None:
    """torch.version.cuda without importing torch (read torch/version.py), or from torch when already imported."""
    mod = sys.modules.get("torch")
    if mod is not None:
        return getattr(getattr(mod, "version", None), "cuda", None)
    try:

        spec = importlib.util.find_spec("torch")
        if spec is None or not spec.submodule_search_locations:
            return None
        text = (Path(next(iter(spec.submodule_search_locations))) / "version.py").read_text(encoding="utf-8")
    except Exception:
        return None
    m = re.search(r"^cuda\s*(?::[^=\n]*)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
    return m.group(1) if m else None


def _nvml_info(index: int = 0) -> dict[str, Any]:
    """GPU name, driver, CUDA driver version, max and current SM clock, and throttle reasons now; {} without NVML."""
    try:
        import pynvml as nv
    except Exception:
        return {}
    out: dict[str, Any] = {}
    try:
        nv.nvmlInit()
    except Exception:
        return {}
    try:
        def s(x: Any) -> str:
            return x.decode() if isinstance(x, bytes) else str(x)

        out["driver"] = s(nv.nvmlSystemGetDriverVersion())
        try:
            v = int(nv.nvmlSystemGetCudaDriverVersion())
            out["cuda_driver"] = f"{v // 1000}.{(v % 1000) // 10}"
        except Exception:
            pass
        out["gpu_count"] = int(nv.nvmlDeviceGetCount())
        h = nv.nvmlDeviceGetHandleByIndex(index)
        out["gpu"] = s(nv.nvmlDeviceGetName(h))
        for key, fn in (("sm_clock_mhz_max", lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM)),
                        ("sm_clock_mhz_now", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
                        ("temp_c_now", lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))):
            try:
                out[key] = int(fn())
            except Exception:
                pass
        try:

            get = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
                nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
            bits = int(get(h)) if get else 0
            out["clock_reasons_at_start"] = sorted(n for b, n in THROTTLE_REASONS.items() if bits & b)
        except Exception:
            pass
    except Exception:
        pass
    finally:
        with contextlib.suppress(Exception):
            nv.nvmlShutdown()
    return out


def git_revision(cwd: Path | str | None = None, timeout_s: float = 5.0) -> dict[str, Any] | None:
    """The commit of the git work tree at `cwd` (the code under test) and whether it has local changes; None
    outside a work tree or without git."""
    if shutil.which("git") is None:
        return None

    where = str(cwd or os.getcwd())
    try:
        top = proc.capture(["git", "-C", where, "rev-parse", "--show-toplevel"], timeout_s=timeout_s).strip()
        rev = proc.capture(["git", "-C", where, "rev-parse", "HEAD"], timeout_s=timeout_s).strip()
    except ProfctlError:
        return None
    out: dict[str, Any] = {"repo": top, "commit": rev}
    try:
        status = proc.capture(["git", "-C", where, "status", "--porcelain", "--untracked-files=no"],
                              timeout_s=timeout_s)
        out["dirty"] = bool(status.strip())
    except ProfctlError:
        out["dirty"] = None
    try:
        out["branch"] = proc.capture(["git", "-C", where, "rev-parse", "--abbrev-ref", "HEAD"],
                                     timeout_s=timeout_s).strip()
    except ProfctlError:
        pass
    return out


def clocks_seen(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """What the bench rows' NVML samples say over the whole run: SM clock range, throttle reasons, warnings."""
    got = bench_rows(rows)
    clks = [r.clocks or {} for r in got]
    mins = [c["sm_clock_mhz_min"] for c in clks if c.get("sm_clock_mhz_min")]
    maxs = [c["sm_clock_mhz_max"] for c in clks if c.get("sm_clock_mhz_max")]
    reasons = sorted({x for c in clks for x in (c.get("throttle_reasons") or [])})
    return {
        "sampled_points": sum(1 for c in clks if c.get("clock_samples")),
        "sm_clock_mhz_min": min(mins) if mins else None,
        "sm_clock_mhz_max": max(maxs) if maxs else None,
        "throttle_reasons": reasons,
        "clock_warnings": [w for w in (r.clock_warning for r in got) if w],
    }


# ---------------------------------------------------------------------------------------------- listing runs
@dataclass
class RunInfo:
    """One run directory as read back: its manifest and the status to show."""

    path: Path
    manifest: dict[str, Any] = field(default_factory=dict)
    status: str = "running"
    note: str | None = None

    @property
    def run_id(self) -> str:
        return str(self.manifest.get("run_id") or self.path.name)

    @property
    def kind(self) -> str:
        return str(self.manifest.get("kind") or "?")

    def files(self) -> list[tuple[str, int]]:
        """(relative path, size in bytes) of every file in the run directory, temporary files left out."""
        out = []
        for p in sorted(self.path.rglob("*")):
            if p.is_file() and not p.name.endswith(".tmp"):
                out.append((str(p.relative_to(self.path)), p.stat().st_size))
        return out

    def duration_s(self) -> float | None:
        try:
            a = _dt.datetime.fromisoformat(str(self.manifest["started"]))
            b = _dt.datetime.fromisoformat(str(self.manifest["ended"]))
        except (KeyError, TypeError, ValueError):
            return None
        return (b - a).total_seconds()


def effective_status(manifest: dict[str, Any]) -> tuple[str, str | None]:
    """The status to show: a 'running' run whose process is gone from this host was killed (SIGKILL, OOM) and
    is shown as 'incomplete'."""
    status = str(manifest.get("status") or "unknown")
    if status != "running":
        return status, manifest.get("reason")
    pid, host = manifest.get("pid"), manifest.get("host")
    if isinstance(pid, int) and host == platform.node() and not _alive(pid):
        return "incomplete", f"process {pid} ended without finishing the run (killed?)"
    return status, None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def load_run_dir(path: Path) -> RunInfo:
    """Read one run directory (any command's: only manifest.json is required)."""
    try:
        m = read_manifest(path)
    except ProfctlError as e:
        return RunInfo(path=path, manifest={}, status="unreadable", note=e.one_line())
    status, note = effective_status(m)
    return RunInfo(path=path, manifest=m, status=status, note=note)


def list_runs(root: Path | str | None = None) -> list[RunInfo]:
    """Every run directory under the reports root, oldest first."""
    base = reports_root(root)
    if not base.is_dir():
        return []
    out = [load_run_dir(p) for p in base.iterdir() if p.is_dir() and (p / MANIFEST).exists()]
    out.sort(key=lambda r: (str(r.manifest.get("started") or ""), r.path.name))
    return out


def load_run(ref: str | Path, root: Path | str | None = None) -> RunInfo:
    """A run by directory, manifest path, id, unique part of an id, or 'latest' (UsageError otherwise)."""
    p = Path(ref)
    if p.is_dir() and (p / MANIFEST).exists():
        return load_run_dir(p)
    if p.is_file() and p.name == MANIFEST:
        return load_run_dir(p.parent)
    if p.is_dir():
        raise UsageError(f"{ref}: not a run directory (no {MANIFEST})")
    all_runs = list_runs(root)
    base = reports_root(root)
    s = str(ref)
    if s in ("latest", "last"):
        if not all_runs:
            raise UsageError(f"no runs under {base}")
        return all_runs[-1]
    exact = [r for r in all_runs if r.path.name == s or r.run_id == s]
    if exact:
        return exact[0]
    part = [r for r in all_runs if s in r.path.name]
    if len(part) == 1:
        return part[0]
    if len(part) > 1:
        names = ", ".join(r.path.name for r in part[:3])
        raise UsageError(f"{s!r} matches {len(part)} runs under {base} ({names}{', ...' if len(part) > 3 else ''});"
                         " give more of the id")
    raise UsageError(f"no run {s!r} under {base} (see `profctl runs`)")
