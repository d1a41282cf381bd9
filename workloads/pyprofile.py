"""Run a user's Python program under torch.profiler: ``profctl torch -- python SCRIPT.py ARGS`` (or ``-m MODULE``).

    python -m profctl.workloads.pyprofile --trace run/trace.json.gz [--jsonl run/workload.jsonl] -- SCRIPT.py ARGS...
    python -m profctl.workloads.pyprofile --trace run/trace.json.gz -- -m package.module ARGS...
    python -m profctl.workloads.pyprofile --trace run/trace.json.gz -- -c "import mymod; mymod.main()" ARGS...

The program runs in this process as it would on its own: ``sys.argv`` is its own, ``__name__`` is
``"__main__"``, the working directory and environment are unchanged. The profiler records CPU ops and (with a
GPU) CUDA activity from the program's start to its end. Torch traces do not see NVTX ranges, so the program's
NVTX ranges (``torch.cuda.nvtx.range_push/pop/range_start/end/range``, and the ``nvtx`` package's
``push_range/pop_range/start_range/end_range/annotate``) are mirrored as ``record_function`` ranges of the same
name: the summary groups kernels by them like by the program's own ``record_function`` ranges.

The program's exit status becomes this process's exit status (and an ``exit`` event in ``--jsonl``); the trace
is written whatever the status.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import runpy
import sys
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .torch_profile import key_averages_path


class RangeMirror:
    """record_function ranges opened and closed where the program pushes and pops NVTX ranges (per thread for
    push/pop; by id for start/end)."""

    def __init__(self) -> None:
        import torch

        self._rf = torch.profiler.record_function
        self._local = threading.local()
        self._started: dict[Any, Any] = {}
        self._own: set[int] = set()
        self._next = 1 << 40  # ids handed out for start_range when the real NVTX returns none

    def _stack(self) -> list[Any]:
        st: list[Any] | None = getattr(self._local, "stack", None)
        if st is None:
            st = self._local.stack = []
        return st

    def push(self, name: Any) -> None:
        rf = self._rf(str(name))
        rf.__enter__()
        self._stack().append(rf)

    def pop(self) -> None:
        st = self._stack()
        if st:
            st.pop().__exit__(None, None, None)

    def start(self, name: Any, rid: Any) -> Any:
        """Open `name`; the id the program gets back (the real NVTX id, or one of ours when NVTX is off and
        returned None)."""
        rf = self._rf(str(name))
        rf.__enter__()
        if rid is None:
            self._next += 1
            rid = self._next
            self._own.add(rid)
        self._started[self._key(rid)] = rf
        return rid

    def end(self, rid: Any) -> bool:
        """Close the range `rid` names; False when the id was one of ours (nothing to pass on to NVTX)."""
        rf = self._started.pop(self._key(rid), None)
        if rf is not None:
            rf.__exit__(None, None, None)
        return rid not in self._own

    @staticmethod
    def _key(rid: Any) -> Any:
        return rid if isinstance(rid, int) else id(rid)

    def close(self) -> None:
        """Close what the program left open (a range still open at exit would be lost from the trace)."""
        while self._stack():
            self.pop()
        for rf in list(self._started.values()):
            rf.__exit__(None, None, None)
        self._started.clear()


def _message(args: tuple[Any, ...], kw: dict[str, Any]) -> str:
    msg = kw.get("message", args[0] if args else "")
    return "" if msg is None else str(msg)


def install_mirror(m: RangeMirror) -> None:
    """Wrap the NVTX entry points a Python program uses so that each also drives `m`."""
    import torch

    nv = torch.cuda.nvtx
    push, pop, rstart, rend = nv.range_push, nv.range_pop, nv.range_start, nv.range_end

    def range_push(msg: str) -> int:
        m.push(msg)
        return push(msg)

    def range_pop() -> int:
        m.pop()
        return pop()

    def range_start(msg: str) -> int:
        return int(m.start(msg, rstart(msg)))

    def range_end(rid: int) -> None:
        if m.end(rid):
            rend(rid)

    @contextlib.contextmanager
    def range_(msg: str, *args: Any, **kwargs: Any) -> Iterator[None]:
        range_push(msg.format(*args, **kwargs))
        try:
            yield
        finally:
            range_pop()

    for name, fn in (("range_push", range_push), ("range_pop", range_pop), ("range_start", range_start),
                     ("range_end", range_end), ("range", range_)):
        setattr(nv, name, fn)
    _install_nvtx_package(m)


def _install_nvtx_package(m: RangeMirror) -> None:
    try:
        import nvtx
    except Exception:
        return
    push, pop, start, end, annotate = nvtx.push_range, nvtx.pop_range, nvtx.start_range, nvtx.end_range, \
        nvtx.annotate

    def push_range(*args: Any, **kw: Any) -> Any:
        m.push(_message(args, kw))
        return push(*args, **kw)

    def pop_range(*args: Any, **kw: Any) -> Any:
        m.pop()
        return pop(*args, **kw)

    def start_range(*args: Any, **kw: Any) -> Any:
        return m.start(_message(args, kw), start(*args, **kw))

    def end_range(rid: Any, *args: Any, **kw: Any) -> Any:
        return end(rid, *args, **kw) if m.end(rid) else None

    class Annotate(annotate):  # type: ignore[misc, valid-type]
        """nvtx.annotate as a context manager and as a decorator, mirrored (also when no NVTX tool is attached
        and the real one does nothing)."""

        def __enter__(self) -> Any:
            m.push(self.init_args[0] or "")
            return super().__enter__()

        def __exit__(self, *exc: Any) -> Any:
            try:
                return super().__exit__(*exc)
            finally:
                m.pop()

        def __call__(self, func: Any) -> Any:
            name = self.init_args[0] or func.__name__
            inner = super().__call__(func)

            @functools.wraps(func)
            def mirrored(*args: Any, **kwargs: Any) -> Any:
                m.push(name)
                try:
                    return inner(*args, **kwargs)
                finally:
                    m.pop()

            return mirrored

    nvtx.push_range, nvtx.pop_range, nvtx.start_range, nvtx.end_range = push_range, pop_range, start_range, end_range
    nvtx.annotate = Annotate


def run_program(entry: list[str], error: dict[str, Any] | None = None) -> int:
    """Run ``SCRIPT.py ARGS``, ``-m MODULE ARGS`` or ``-c CODE ARGS`` as __main__; its exit status. An exception it
    raises is printed as Python would (without this wrapper's frames) and described in `error` (``exception``,
    ``where``)."""
    module, inline = entry[0] == "-m", entry[0] == "-c"
    target = entry[1] if module or inline else entry[0]
    sys.argv = ["-c" if inline else target if module else entry[0], *entry[(2 if module or inline else 1):]]
    if inline:
        sys.path.insert(0, "")  # as `python -c`: the working directory first
    elif not module:
        sys.path.insert(0, str(Path(target).resolve().parent))
    try:
        if inline:
            exec(compile(target, "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
        elif module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(target, run_name="__main__")
    except SystemExit as e:
        code = e.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    except BaseException as e:
        _print_own_traceback(e, error)
        return 1
    return 0


def _print_own_traceback(e: BaseException, error: dict[str, Any] | None) -> None:
    """The program's traceback from its own first frame on (not this wrapper's, nor runpy's), and the exception
    and the innermost frame in `error`."""
    tb = e.__traceback__
    while tb is not None and (tb.tb_frame.f_code.co_filename in (__file__, runpy.__file__)
                              or tb.tb_frame.f_code.co_filename.startswith("<frozen")):
        tb = tb.tb_next
    traceback.print_exception(type(e), e, tb)
    sys.stderr.flush()
    if error is not None:
        error["exception"] = "".join(traceback.format_exception_only(type(e), e)).strip().splitlines()[-1][:500]
        last = traceback.extract_tb(tb)[-1] if tb is not None else None
        if last is not None:
            error["where"] = f"{last.filename}:{last.lineno} in {last.name}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m profctl.workloads.pyprofile", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trace", required=True, help="the trace to write (.json.gz)")
    p.add_argument("--jsonl", default=None, help="append the device and exit events here")
    p.add_argument("--torch-shapes", action="store_true")
    p.add_argument("--torch-memory", action="store_true")
    p.add_argument("--torch-stacks", action="store_true")
    p.add_argument("program", nargs=argparse.REMAINDER,
                   help="-- SCRIPT.py ARGS..., -- -m MODULE ARGS... or -- -c CODE ARGS...")
    a = p.parse_args(argv)
    entry = a.program[1:] if a.program[:1] == ["--"] else a.program
    if not entry or (entry[0] in ("-m", "-c") and len(entry) < 2):
        p.error("give the program: -- SCRIPT.py ARGS..., -- -m MODULE ARGS... or -- -c CODE ARGS...")
    if entry[0] not in ("-m", "-c") and not Path(entry[0]).is_file():
        print(f"error: {entry[0]}: no such file", file=sys.stderr)
        return 2

    import torch
    from torch.profiler import ProfilerActivity, profile

    cuda = torch.cuda.is_available()
    _emit(a.jsonl, {"event": "device", "name": torch.cuda.get_device_name(0) if cuda else "cpu",
                    "torch": torch.__version__, "cuda": torch.version.cuda if cuda else None})
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    mirror = RangeMirror()
    install_mirror(mirror)
    prof = profile(activities=activities, record_shapes=a.torch_shapes, profile_memory=a.torch_memory,
                   with_stack=a.torch_stacks)
    prof.start()
    error: dict[str, Any] = {}
    try:
        status = run_program(entry, error)
    finally:
        mirror.close()
        if cuda:
            with contextlib.suppress(Exception):
                torch.cuda.synchronize()
        prof.stop()
        _write(prof, Path(a.trace), cuda)
    _emit(a.jsonl, {"event": "exit", "status": status, **error})
    return status


def _write(prof: Any, trace: Path, cuda: bool) -> None:
    """The Chrome trace and the key_averages table, each written to a temporary name then renamed."""
    trace.parent.mkdir(parents=True, exist_ok=True)
    tmp = trace.with_name(f".{trace.name}.partial{''.join(trace.suffixes[-2:]) or '.json'}")
    prof.export_chrome_trace(str(tmp))
    os.replace(tmp, trace)
    ka = prof.key_averages()
    key = "self_device_time_total" if cuda else "self_cpu_time_total"
    try:
        table = str(ka.table(sort_by=key, row_limit=-1, max_name_column_width=90))
    except (AttributeError, KeyError, ValueError):
        table = str(ka.table(row_limit=-1))
    out = key_averages_path(trace)
    tmpk = out.with_name(f".{out.name}.partial")
    tmpk.write_text(table, encoding="utf-8")
    os.replace(tmpk, out)


def _emit(path: str | None, obj: dict[str, Any]) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(obj) + "\n")


if __name__ == "__main__":
    sys.exit(main())
