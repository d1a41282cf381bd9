"""Workload option validation: every bad value is named in the message."""

import pytest

from profctl.errors import UsageError
from profctl.workload import WorkloadArgs
from workloads.spec import AttentionSpec, SpecError, expand, parse_list


@pytest.mark.parametrize(("kw", "needle"), [
    ({"backend": "flash3000"}, "flash3000"),
    ({"backend": "eager", "batch": 0}, "--batch"),
    ({"backend": "eager", "seqlen_q": -5}, "-5"),
    ({"backend": "eager", "head_dim": 0}, "--head-dim"),
    ({"backend": "eager", "heads": 6, "kv_heads": 4}, "--kv-heads 4 does not divide --heads 6"),
    ({"backend": "eager", "dtype": "fp8"}, "fp8"),
    ({"backend": "eager", "pass_": "both"}, "both"),
    ({"backend": "eager", "layout": "sbhd"}, "sbhd"),
])
def test_spec_rejects_with_the_value(kw: dict, needle: str) -> None:
    with pytest.raises(SpecError, match=None) as ei:
        AttentionSpec(**kw)
    assert needle in str(ei.value)


def test_parse_list() -> None:
    assert parse_list("512, 1024,2048", int) == [512, 1024, 2048]
    assert parse_list(["1", "2,3"], int) == [1, 2, 3]
    assert parse_list("true,false", bool) == [True, False]
    with pytest.raises(SpecError, match="'abc'"):
        parse_list("abc", int, option="--seqlen")
    with pytest.raises(SpecError, match="maybe"):
        parse_list("maybe", bool, option="--causal")


def test_seqlen_sets_both_lengths_without_crossing() -> None:
    specs = WorkloadArgs(backend="eager", seqlen="128,256", device="cpu").resolved().specs()
    assert [(s.seqlen_q, s.seqlen_kv) for s in specs] == [(128, 128), (256, 256)]


def test_explicit_q_and_kv_lists_cross() -> None:
    specs = WorkloadArgs(backend="eager", seqlen_q="128", seqlen_kv="256,512", device="cpu").resolved().specs()
    assert [(s.seqlen_q, s.seqlen_kv) for s in specs] == [(128, 256), (128, 512)]


def test_expand_keeps_backends_of_one_shape_together() -> None:
    specs = expand(backends=["a" * 0 + "eager", "sdpa-math"], batch=[1], seqlen_q=[8, 16], seqlen_kv=None,
                   heads=[2], kv_heads=None, head_dim=[4], dtype=["fp32"], causal=[False], passes=["fwd"])
    assert [(s.backend, s.seqlen_q) for s in specs] == [("eager", 8), ("sdpa-math", 8), ("eager", 16),
                                                       ("sdpa-math", 16)]


def test_workload_args_errors_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="nope"):
        WorkloadArgs(backend="nope", device="cpu").resolved()
    with pytest.raises(UsageError, match="--iters"):
        WorkloadArgs(backend="eager", device="cpu", iters=0).resolved()
    with pytest.raises(UsageError, match="device"):
        WorkloadArgs(device="tpu").resolved()


def test_cpu_defaults() -> None:
    r = WorkloadArgs(device="cpu").resolved()
    assert r.backends() == ["sdpa-flash", "sdpa-math", "eager"]
    assert {s.dtype for s in r.specs()} == {"fp32"}


def test_child_argv_round_trips_through_the_workload_parser() -> None:
    from workloads.attention import build_parser, specs_from_args

    wl = WorkloadArgs(backend="eager,sdpa-math", seqlen="64,128", heads="4", kv_heads="2", head_dim="16",
                      causal="true", pass_="fwd+bwd", device="cpu", nvtx=False).resolved()
    argv = wl.child_argv()
    assert argv[1:3] == ["-m", "workloads.attention"]
    a = build_parser().parse_args(argv[3:])
    assert specs_from_args(a) == wl.specs()
    assert a.no_nvtx
