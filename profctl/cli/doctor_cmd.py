"""`profctl doctor`: which profiling tools are here, their versions, the GPU and driver, and what is broken."""

from __future__ import annotations

import importlib
import json

import typer

from profctl.cli._guard import guard
from profctl.cli._output import check_format
from profctl.errors import ProfctlError


@guard
def doctor(
    format: str = typer.Option("table", "--format", "-f", help="table (lines to read) or json"),
) -> None:
    """Report every tool found (nsys, ncu), its version, the GPU and driver, and problems with their fix (exit 1
    when there is a problem, so a script can stop)."""
    check_format(format, ("table", "json"))
    report = collect()
    if format == "json":
        print(json.dumps(report, indent=1, default=str))
        if report["problems"]:
            raise typer.Exit(1)
        return
    for t in report["tools"]:
        where = f"{t['path']} ({t['found_via']})" if t.get("path") else "not found"
        ver = f" {t['version']}" if t.get("version") else ""
        print(f"{t['name']:6s}{ver}: {where}")
        for alt in t.get("others", []):
            print(f"        also: {alt}")
    g = report["gpu"]
    if g.get("gpus"):
        for i, gpu in enumerate(g["gpus"]):
            print(f"gpu {i} : {gpu}")
    print(f"driver: {g.get('driver') or 'unknown'}" + (f" (via {g['source']})" if g.get("source") else ""))
    if report["problems"]:
        print("problems:")
        for p in report["problems"]:
            print(f"  - {p}")
        raise typer.Exit(1)
    print("no problems found")


def collect() -> dict:
    """The findings as a dict: tools, gpu, problems (each problem one line naming the fix)."""
    tools: list[dict] = []
    problems: list[str] = []
    tools.append(_nsys(problems))
    ncu = _ncu(problems)
    if ncu is not None:
        tools.append(ncu)
    return {"tools": tools, "gpu": _gpu(problems), "problems": problems}


def _nsys(problems: list[str]) -> dict:
    from profctl.tools import nsys as adapter

    t: dict = {"name": "nsys"}
    cs = adapter.candidates()
    try:
        exe = adapter.find()
    except ProfctlError as e:
        problems.append(f"nsys: {e.one_line()}")
        return t
    t["path"] = str(exe)
    t["found_via"] = next((c.how for c in cs if c.path == exe), "?")
    t["others"] = [f"{c.path} ({c.how})" for c in cs if c.path != exe]
    try:
        t["version"] = adapter.version(exe)
    except ProfctlError as e:
        problems.append(f"nsys at {exe} does not run: {e.one_line()}")
        return t
    why = adapter.importer_problem(exe)
    if why:
        problems.append(f"nsys {t['version']}: {why}")
    return t


def _ncu(problems: list[str]) -> dict | None:
    """ncu through profctl.tools.ncu when that adapter exists (find()/version())."""
    try:
        mod = importlib.import_module("profctl.tools.ncu")
    except ImportError:
        return None
    find = getattr(mod, "find", None)
    version = getattr(mod, "version", None)
    if find is None:
        return None
    t: dict = {"name": "ncu"}
    try:
        exe = find()
        t["path"] = str(exe)
        t["found_via"] = "profctl.tools.ncu"
        if version is not None:
            t["version"] = str(version(exe))
    except Exception as e:  # another adapter's failure must not break doctor
        msg = e.one_line() if hasattr(e, "one_line") else f"{type(e).__name__}: {e}"
        problems.append(f"ncu: {msg}")
    return t


def _gpu(problems: list[str]) -> dict:
    """GPU names and driver version from NVML (pynvml) when importable, else from torch."""
    g: dict = {}
    try:
        import pynvml
    except ImportError:
        pynvml = None
    if pynvml is not None:
        try:
            pynvml.nvmlInit()
            try:
                drv = pynvml.nvmlSystemGetDriverVersion()
                g["driver"] = drv.decode() if isinstance(drv, bytes) else str(drv)
                n = pynvml.nvmlDeviceGetCount()
                names = []
                for i in range(n):
                    h = pynvml.nvmlDeviceGetHandleByIndex(i)
                    nm = pynvml.nvmlDeviceGetName(h)
                    names.append(nm.decode() if isinstance(nm, bytes) else str(nm))
                g["gpus"] = names
                g["source"] = "NVML"
            finally:
                pynvml.nvmlShutdown()
            return g
        except Exception as e:
            g["nvml_error"] = f"{type(e).__name__}: {e}"
    try:
        import torch

        if torch.cuda.is_available():
            g["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            g["cuda_runtime"] = torch.version.cuda
            g["source"] = "torch"
            return g
    except Exception:
        pass
    problems.append("no NVIDIA GPU visible (NVML/torch see none): profiling commands need one; "
                    "`profctl report` still reads existing reports")
    return g
