"""Nsight Systems: where it is, its version, the argv of `nsys profile`/`export`/`stats`, and its known failures.

Search order of :func:`find`: ``PROFCTL_NSYS`` (the executable or its folder), ``PATH``, then the usual install
places: ``/opt/nvidia/nsight-systems/*/bin``, the CUDA toolkit's ``bin`` (``$CUDA_HOME``, ``/usr/local/cuda*``),
and the copy bundled inside Nsight Compute at ``<ncu root>/host/target-linux-x64/nsys`` (ncu found through
``PROFCTL_NCU``, ``PATH`` or ``/opt/nvidia/nsight-compute/*``). Newer versions first within one glob.
"""

from __future__ import annotations

import ctypes
import glob
import os
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from profctl import proc
from profctl.errors import ProfctlError, ToolFailed, ToolNotFound
from profctl.nvtx import nsys_capture_name

ENV = "PROFCTL_NSYS"
DEFAULT_TRACE = ("cuda", "nvtx", "osrt", "cublas", "cudnn")
TRACE_CHOICES = ("cuda", "nvtx", "osrt", "cublas", "cudnn", "cusparse", "nvvideo", "opengl", "vulkan", "mpi",
                 "ucx", "oshmem", "openacc", "openmp", "python-gil", "none")
LIBDW_FIX = "install libdw1 (apt-get install libdw1 libelf1) or put the folder holding libdw.so.1 on LD_LIBRARY_PATH"
LIBDW_HINT = f"its importer (QdstrmImporter) cannot load libdw.so.1: {LIBDW_FIX}"


@dataclass(frozen=True)
class Candidate:
    path: Path
    how: str


def _version_key(p: str) -> list[int]:
    return [int(x) for x in re.findall(r"\d+", p)]


def _ncu_roots() -> list[Path]:
    roots: list[Path] = []
    env = os.environ.get("PROFCTL_NCU")
    if env:
        e = Path(env)
        roots.append(e if e.is_dir() else e.parent)
    w = shutil.which("ncu")
    if w:
        roots.append(Path(os.path.realpath(w)).parent)
    roots += [Path(p) for p in sorted(glob.glob("/opt/nvidia/nsight-compute/*"), key=_version_key, reverse=True)]
    cuda = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    for base in ([cuda] if cuda else []) + ["/usr/local/cuda"]:
        roots += [Path(p) for p in sorted(glob.glob(f"{base}/nsight-compute*"), key=_version_key, reverse=True)]
    return roots


def candidates() -> list[Candidate]:
    """Every place nsys may be, in search order (existing executables only, no duplicates)."""
    out: list[Candidate] = []
    env = os.environ.get(ENV)
    if env:
        e = Path(env)
        out.append(Candidate(e / "nsys" if e.is_dir() else e, f"${ENV}"))
    w = shutil.which("nsys")
    if w:
        out.append(Candidate(Path(w), "PATH"))
    for p in sorted(glob.glob("/opt/nvidia/nsight-systems/*/bin/nsys"), key=_version_key, reverse=True):
        out.append(Candidate(Path(p), "/opt/nvidia/nsight-systems"))
    cuda = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    for base in ([cuda] if cuda else []) + ["/usr/local/cuda"] + sorted(
            glob.glob("/usr/local/cuda-*"), key=_version_key, reverse=True):
        out.append(Candidate(Path(base) / "bin" / "nsys", "CUDA toolkit"))
    for root in _ncu_roots():
        out.append(Candidate(root / "host" / "target-linux-x64" / "nsys", f"bundled in Nsight Compute ({root})"))
    seen: set[str] = set()
    res = []
    for c in out:
        key = os.path.realpath(c.path)
        if key in seen:
            continue
        if c.how == f"${ENV}" or (c.path.is_file() and os.access(c.path, os.X_OK)):
            seen.add(key)
            res.append(c)
    return res


def find() -> Path:
    """The nsys executable to use; ToolNotFound (with where we looked) when there is none."""
    cs = candidates()
    if cs:
        c = cs[0]
        if c.how == f"${ENV}" and not (c.path.is_file() and os.access(c.path, os.X_OK)):
            raise ToolNotFound(f"${ENV}={os.environ.get(ENV)} is not an nsys executable")
        return c.path
    raise ToolNotFound("nsys (Nsight Systems) was not found",
                       hint=f"looked at ${ENV}, PATH, /opt/nvidia/nsight-systems/*/bin, the CUDA toolkit's bin and "
                            "<ncu root>/host/target-linux-x64; set PROFCTL_NSYS=/path/to/nsys")


def version(exe: Path | str | None = None) -> str:
    """`nsys --version` as a short version string, e.g. '2025.3.1.90'."""
    out = proc.capture([str(exe or find()), "--version"], timeout_s=60)
    return parse_version(out)


def parse_version(text: str) -> str:
    m = re.search(r"(\d{4}\.\d+(?:\.\d+)*(?:\.\d+)?)", text)
    return m.group(1) if m else text.strip().splitlines()[0] if text.strip() else "unknown"


def importers(exe: Path) -> list[Path]:
    """nsys's QdstrmImporter binaries next to `exe` (its folder, the parent, or a sibling host folder)."""
    base = Path(os.path.realpath(exe)).parent
    found: list[Path] = []
    for pattern in ("QdstrmImporter*", "../QdstrmImporter*", "../host-linux-*/QdstrmImporter*",
                    "../*/QdstrmImporter*"):
        for p in sorted(base.glob(pattern)):
            rp = Path(os.path.realpath(p))
            if rp.is_file() and rp not in found:
                found.append(rp)
    return found


def missing_libraries(ldd_output: str) -> list[str]:
    """Library names `ldd` reports as 'not found'."""
    return sorted({m.group(1) for m in re.finditer(r"^\s*(\S+)\s+=>\s+not found", ldd_output, re.M)})


def describe_missing(imp: str, missing: Sequence[str]) -> str:
    if any(m.startswith("libdw") or m.startswith("libelf") for m in missing):
        return f"{imp} cannot load {', '.join(missing)}, so nsys profile writes only a .qdstrm: {LIBDW_FIX}"
    return f"{imp} cannot load {', '.join(missing)}: install the packages that provide them"


def _loadable(lib: str) -> bool:
    try:
        ctypes.CDLL(lib)
        return True
    except OSError:
        return False


def importer_problem(exe: Path) -> str | None:
    """Why nsys's importer cannot run here (a shared library it cannot load), or None when it can."""
    for imp in importers(exe):
        try:
            out = proc.capture(["ldd", str(imp)], timeout_s=30)
        except ProfctlError:
            out = ""
        missing = missing_libraries(out)
        if missing:
            return describe_missing(imp.name, missing)
        try:  # libdw may be opened at run time (dlopen), which ldd does not show
            with open(imp, "rb") as f:
                names_libdw = b"libdw.so.1" in f.read(64 * 2**20)
        except OSError:
            names_libdw = False
        if names_libdw and not _loadable("libdw.so.1"):
            return describe_missing(imp.name, ["libdw.so.1"])
    return None


# ---------------------------------------------------------------------------------------------------- argv
def profile_argv(exe: Path, output: Path, child: Sequence[str], *, trace: Sequence[str] = DEFAULT_TRACE,
                 capture: str = "cudaProfilerApi", sample: bool = False,
                 extra: Sequence[str] = ()) -> list[str]:
    """`nsys profile` for one run. capture: 'cudaProfilerApi' (all measured regions, one report: the range end
    is ignored so a sweep's later Start/Stop pairs stay in it), 'nvtx' (from the first 'measure' range of
    profctl's domain) or 'none' (the whole process)."""
    argv = [str(exe), "profile", f"--trace={','.join(trace)}", f"--output={output}", "--force-overwrite=true",
            "--export=none", "--stats=false"]
    if sample:
        argv += ["--sample=process-tree", "--cpuctxsw=process-tree"]
    else:
        argv += ["--sample=none", "--cpuctxsw=none"]
    if capture == "cudaProfilerApi":
        argv += ["--capture-range=cudaProfilerApi", "--capture-range-end=none"]
    elif capture == "nvtx":
        argv += ["--capture-range=nvtx", f"--nvtx-capture={nsys_capture_name()}", "--capture-range-end=none"]
    elif capture != "none":
        raise ValueError(f"unknown capture {capture!r}")
    return argv + list(extra) + list(child)


def export_argv(exe: Path, rep: Path, out: Path) -> list[str]:
    return [str(exe), "export", "--type=sqlite", f"--output={out}", "--force-overwrite=true", "--lazy=false",
            str(rep)]


def stats_argv(exe: Path, report: Path, reports: Sequence[str], out_prefix: Path) -> list[str]:
    return [str(exe), "stats", "--force-export=true", "--format=csv", f"--output={out_prefix}",
            *[f"--report={r}" for r in reports], str(report)]


# ---------------------------------------------------------------------------------------------------- running
def report_path(output: Path) -> Path:
    """The report `nsys profile --output=OUTPUT` writes."""
    return output.with_suffix(".nsys-rep")


def classify_profile(output: Path) -> Callable[[proc.ProcResult], Exception | None]:
    """How a finished `nsys profile` run reads: no report (and why: a missing libdw leaves only a .qdstrm; no
    capture range was ever opened), or None when the report is there."""

    def classify(res: proc.ProcResult) -> Exception | None:
        rep = report_path(output)
        qd = output.with_suffix(".qdstrm")
        text = res.log_text(200_000)
        if not rep.exists() and (qd.exists() or "Importer error" in text or "QdstrmImporter" in text):
            return ToolFailed("nsys profile left only a .qdstrm, no .nsys-rep", log=res.log, hint=LIBDW_HINT)
        if res.returncode != 0 and not rep.exists():
            return ToolFailed(f"nsys profile exited with status {res.returncode} and wrote no report",
                              log=res.log)
        if not rep.exists():
            return ToolFailed("nsys profile wrote no report (did the program call cudaProfilerStart? "
                              "try --capture none)", log=res.log)
        return None

    return classify


def export_sqlite(exe: Path, rep: Path, out: Path, *, log: Path, timeout_s: float = 1800) -> Path:
    """`nsys export --type sqlite` of `rep` into `out`."""
    res = proc.run(export_argv(exe, rep, out), log=log, timeout_s=timeout_s, check=False)
    if res.returncode != 0 or not out.exists():
        lines = [ln for ln in res.log_text(20_000).splitlines() if ln.strip() and not ln.startswith("$ ")]
        tail = lines[-1].strip()[:300] if lines else "(no output)"
        raise ToolFailed(f"nsys export failed (status {res.returncode}): {tail}", log=log)
    return out
