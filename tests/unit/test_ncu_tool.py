"""The ncu adapter: where ncu is found, the command line it builds, and how its failures read.

ncu cannot run on this machine (no GPU), so the failure tests feed the messages ncu prints; the same paths run
against the real ncu in tests/gpu/test_ncu_gpu.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from profctl.errors import CounterPermission, NothingMatched, ToolFailed, ToolNotFound
from profctl.nvtx import ncu_include, passes_of
from profctl.pipelines.ncu_pipeline import cases_of
from profctl.pipelines.targets import Workload
from profctl.spec import AttentionSweep
from profctl.tools import ncu as adapter

PERM_LOG = """$ ncu --export x python -m workloads.attention
==PROF== Connected to process 4242 (/usr/bin/python3.12)
==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters on the \
target device 0. For instructions on enabling permissions and to get more information see \
https://developer.nvidia.com/ERR_NVGPUCTRPERM
==PROF== Disconnected from process 4242
"""
METRIC_LOG = """==PROF== Connected to process 77 (/usr/bin/python3.12)
==ERROR== Failed to find metric sm__no_such_counter_anywhere.sum
"""
NOTHING_LOG = """==PROF== Connected to process 77 (/usr/bin/python3.12)
sdpa-flash[b1,sq1024,skv1024,h8,kv8,d128,bf16,full,bhsd] fwd: median 0.1 ms
==PROF== Disconnected from process 77
==WARNING== No kernels were profiled.
"""


def _exe(tmp_path: Path, name: str = "ncu", text: str = "echo 'Version 2025.3.1.0 (build 1) (public-release)'") -> Path:
    p = tmp_path / name
    p.write_text(f"#!/bin/sh\n{text}\n")
    p.chmod(0o755)
    return p


def test_find_prefers_the_env_var_and_reads_the_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = _exe(tmp_path)
    monkeypatch.setenv(adapter.ENV, str(exe))
    assert adapter.find() == exe
    assert adapter.version() == "2025.3.1.0"
    monkeypatch.setenv(adapter.ENV, str(tmp_path / "missing"))
    with pytest.raises(ToolNotFound, match="PROFCTL_NCU"):
        adapter.find()


def test_find_on_path_then_not_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(adapter.ENV, raising=False)
    exe = _exe(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path) + os.pathsep + os.environ.get("PATH", ""))
    assert adapter.find() == exe
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(adapter, "CUDA_BIN", tmp_path / "nope" / "ncu")
    monkeypatch.setattr(adapter, "NSIGHT_GLOB_ROOT", tmp_path / "nope")
    with pytest.raises(ToolNotFound, match="not found"):
        adapter.find()


def test_find_takes_the_newest_nsight_compute_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(adapter.ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(adapter, "CUDA_BIN", tmp_path / "nope" / "ncu")
    root = tmp_path / "nsight-compute"
    for v in ("2024.1.0", "2025.3.1", "2025.10.0"):
        (root / v).mkdir(parents=True)
        _exe(root / v)
    monkeypatch.setattr(adapter, "NSIGHT_GLOB_ROOT", root)
    assert adapter.find() == root / "2025.10.0" / "ncu"


def test_profile_argv_keeps_ncu_defaults_unless_asked() -> None:
    opts = adapter.ProfileOptions(metrics=("a__b.sum", "c__d.pct"), nvtx_include=("regex:profctl@x/",))
    argv = adapter.profile_argv(Path("/bin/ncu"), Path("r.ncu-rep"), opts, ["python", "-m", "w"])
    assert argv[:6] == ["/bin/ncu", "--config-file", "off", "--force-overwrite", "--export", "r.ncu-rep"]
    assert argv[-3:] == ["python", "-m", "w"]
    assert "--metrics" in argv and argv[argv.index("--metrics") + 1] == "a__b.sum,c__d.pct"
    assert argv[argv.index("--nvtx") + 1 : argv.index("--nvtx") + 3] == ["--nvtx-include", "regex:profctl@x/"]
    for flag in ("--clock-control", "--cache-control", "--replay-mode", "--launch-count", "--kernel-name", "--set"):
        assert flag not in argv
    opts = adapter.ProfileOptions(set_name="full", sections=("SpeedOfLight",), kernel_regex="flash",
                                  launch_count=3, replay_mode="application", clock_control="none",
                                  cache_control="none")
    argv = adapter.profile_argv(Path("ncu"), Path("r"), opts, ["t"])
    pairs = {argv[i]: argv[i + 1] for i in range(len(argv) - 1)}
    assert pairs["--set"] == "full" and pairs["--section"] == "SpeedOfLight"
    assert pairs["--kernel-name"] == "regex:flash" and pairs["--launch-count"] == "3"
    assert pairs["--replay-mode"] == "application" and pairs["--clock-control"] == "none"
    assert pairs["--cache-control"] == "none"


def test_nvtx_filter_is_one_expression_for_every_case_and_pass() -> None:
    import re

    wl = Workload(AttentionSweep.from_strings(backend="sdpa-flash,eager", seqlen="1024,2048", heads="8", head_dim="64",
                                              dtype="bf16", batch="1", causal="false", pass_="fwd+bwd",
                                              layout="bhsd", device="cuda"))
    fs = [ncu_include(cases_of(wl))]
    assert len(fs) == 1 and fs[0].startswith("regex:profctl@") and fs[0].endswith("/")
    rx = re.compile(fs[0][len("regex:profctl@"):])
    for be in ("sdpa-flash", "eager"):
        for sq in (1024, 2048):
            for p in ("fwd", "bwd"):
                assert rx.fullmatch(f"{be}[b1,sq{sq},skv{sq},h8,kv8,d64,bf16,full,bhsd]/measure/{be}.{p}/")
    for other in ("sdpa-cudnn[b1,sq1024,skv1024,h8,kv8,d64,bf16,full,bhsd]/measure/sdpa-cudnn.fwd/",
                  "eager[b1,sq1024,skv1024,h8,kv8,d64,bf16,full,bhsd]/warmup/eager.fwd/",
                  "eager[b1,sq4096,skv4096,h8,kv8,d64,bf16,full,bhsd]/measure/eager.fwd/"):
        assert not rx.fullmatch(other)
    assert passes_of("fwd+bwd") == ["fwd", "bwd"] and passes_of("bwd") == ["bwd"]


def test_counter_permission_is_recognised_even_with_status_0(tmp_path: Path) -> None:
    f = adapter.diagnose_log(PERM_LOG, 0)
    assert f is not None and f.kind == "permission"
    e = adapter.failure_error(f, log=tmp_path / "ncu.log")
    assert isinstance(e, CounterPermission)
    line = e.one_line()
    assert "\n" not in line and "NVreg_RestrictProfilingToAdminUsers=0" in line and "root" in line
    assert "SYS_ADMIN" in line and str(tmp_path / "ncu.log") in line


def test_unknown_metric_and_nothing_profiled(tmp_path: Path) -> None:
    f = adapter.diagnose_log(METRIC_LOG, 1)
    assert f is not None and f.kind == "metric" and f.metrics == ("sm__no_such_counter_anywhere.sum",)
    assert "Failed to find metric" in f.message
    f = adapter.diagnose_log(NOTHING_LOG, 0)
    assert f is not None and f.kind == "nothing"
    e = adapter.failure_error(f, log=tmp_path / "l", why_nothing="fa4 fwd: unsupported: no flash_attn.cute")
    assert isinstance(e, NothingMatched) and "fa4 fwd: unsupported" in e.one_line()
    assert adapter.diagnose_log("==PROF== Disconnected\n", 0) is None
    f = adapter.diagnose_log("==ERROR== The application returned an error code (1).\n", 1)
    assert f is not None and isinstance(adapter.failure_error(f, log=tmp_path / "l"), ToolFailed)


def test_the_reader_can_be_warmed_on_the_bundled_report(tmp_path: Path) -> None:
    """Issue 31: ncu_report's one-time start is done on profctl/tools/ncu_warm.ncu-rep (a real report of one
    tiny kernel, recorded on the H200) while ncu runs; nothing to do it with is False, never an error."""
    pytest.importorskip("ncu_report")
    assert adapter.WARM_REPORT.is_file() and adapter.WARM_REPORT.stat().st_size < 200_000
    assert adapter.warm_reader() is True
    assert adapter.warm_reader(tmp_path / "missing.ncu-rep") is False
    bad = tmp_path / "bad.ncu-rep"
    bad.write_bytes(b"not a report")
    assert adapter.warm_reader(bad) is False
