"""Workload option validation: every bad value is named in the message."""

import pytest

from profctl.errors import SpecError, UsageError
from profctl.pipelines.targets import Workload
from profctl.spec import AttentionSpec, AttentionSweep, parse_list


@pytest.mark.parametrize(("kw", "needle"), [
    ({"backend": "flash3000"}, "flash3000"),
    ({"backend": "eager", "batch": 0}, "--batch"),
    ({"backend": "eager", "seqlen_q": -5}, "-5"),
    ({"backend": "eager", "head_dim": 0}, "--head-dim"),
    ({"backend": "eager", "heads": 6, "kv_heads": 4}, "--kv-heads 4 does not divide --heads 6"),
    ({"backend": "eager", "dtype": "fp4"}, "fp4"),  # fp8 is a dtype now (e4m3; tests/unit/test_triton_fp8.py)
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
    for typo in ("128,,256", "128,", ",128", " , "):  # issue 29 item 10: an empty item is a typo, never skipped
        with pytest.raises(SpecError, match=r"--seqlen '.*': an empty item in the comma list"):
            parse_list(typo, int, option="--seqlen")


def sweep(**kw: str | int | bool) -> AttentionSweep:
    return AttentionSweep.from_strings(**kw)


def test_seqlen_sets_both_lengths_without_crossing() -> None:
    specs = sweep(backend="eager", seqlen="128,256", device="cpu").specs()
    assert [(s.seqlen_q, s.seqlen_kv) for s in specs] == [(128, 128), (256, 256)]


def test_explicit_q_and_kv_lists_cross() -> None:
    specs = sweep(backend="eager", seqlen_q="128", seqlen_kv="256,512", device="cpu").specs()
    assert [(s.seqlen_q, s.seqlen_kv) for s in specs] == [(128, 256), (128, 512)]


def test_seqlen_and_seqlen_q_together_is_an_error_naming_both() -> None:
    with pytest.raises(SpecError, match="--seqlen and --seqlen-q"):
        sweep(backend="eager", seqlen="128", seqlen_q="64", device="cpu")


def test_values_are_typed_once() -> None:
    s = sweep(backend="eager,sdpa-math", seqlen="8,16", heads=2, causal="true,false", pass_="fwd+bwd")
    assert s.seqlen_q == (8, 16) and s.heads == (2,) and s.causal == (True, False) and s.passes == ("fwd+bwd",)
    assert AttentionSweep.from_strings(seqlen=[8, 16], causal=[True]) == \
        AttentionSweep.from_strings(seqlen="8,16", causal="true")


def test_specs_keep_backends_of_one_shape_together() -> None:
    specs = sweep(backend="eager,sdpa-math", batch=1, seqlen="8,16", heads=2, head_dim=4, dtype="fp32",
                  device="cpu").specs()
    assert [(s.backend, s.seqlen_q) for s in specs] == [("eager", 8), ("sdpa-math", 8), ("eager", 16),
                                                       ("sdpa-math", 16)]


def test_bad_values_are_spec_errors_and_usage_errors() -> None:
    with pytest.raises(SpecError, match="nope"):
        sweep(backend="nope", device="cpu")
    with pytest.raises(SpecError, match="--iters"):
        sweep(backend="eager", device="cpu", iters=0)
    with pytest.raises(SpecError, match="device"):
        sweep(device="tpu")
    with pytest.raises(UsageError, match="--kv-heads 4 does not divide --heads 6"):
        Workload(sweep(backend="eager", heads=6, kv_heads=4, device="cpu")).resolve()


def test_function_references_are_backends() -> None:
    s = sweep(backend="eager,my_attn.py:attention,pkg.mod:fn", device="cpu")
    assert s.backends == ("eager", "my_attn.py:attention", "pkg.mod:fn")
    with pytest.raises(SpecError, match=r"path/to/file\.py:fn"):
        sweep(backend="my_attn.py:", device="cpu")


def test_cpu_defaults() -> None:
    r = Workload(sweep(device="cpu")).resolve()
    assert r.backends() == ("sdpa-flash", "sdpa-math", "eager")
    assert {s.dtype for s in r.cases()} == {"fp32"}


def test_child_argv_round_trips_through_the_workload_parser() -> None:
    from profctl.workloads.attention import build_parser, sweep_from_args

    wl = Workload(sweep(backend="eager,sdpa-math", seqlen="64,128", heads="4", kv_heads="2", head_dim="16",
                        causal="true", pass_="fwd+bwd", device="cpu", nvtx=False)).resolve()
    argv = wl.argv()
    assert argv[1:3] == ["-m", "profctl.workloads.attention"]
    a = build_parser().parse_args(argv[3:])
    assert sweep_from_args(a).specs() == wl.cases()
    assert a.no_nvtx
