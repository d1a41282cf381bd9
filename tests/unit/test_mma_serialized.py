"""mma-serialized (issue 50): following explain's "interleave two tiles" on profctl's FP8 Gluon forward (the next
block's Q·Kᵀ issued before this block's softmax), the first version carried a running P·V's accumulator through its
loop, and ptxas serialized every wgmma of the kernel (C7514, said only with ptxas -v). explain read it as
mma-not-overlapped and advised the overlap the kernel already asked for. Recorded with plain ncu
(tests/data/ladder50/README.md: plant_serial.ncu-rep.xz, benchmarks/plant_mma_serialized.py): the fault planted
(``CARRY_PV``) against its fix, one launch each."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl.analysis.wgmma_serial import serialized
from profctl.cli import app

DATA = Path(__file__).resolve().parents[1] / "data" / "ladder50"
PLANT = str(DATA / "plant_serial.ncu-rep.xz")
AHEAD = str(DATA / "fp8_ahead.ncu-rep.xz")


@dataclass
class _Pc:
    offset: int
    sass: str
    executed: int = 100
    samples: int = 0
    file: str | None = "k.py"
    line: int | None = 7


class _P:
    def __init__(self, *sass: str, samples: dict[int, int] | None = None) -> None:
        self.pcs = tuple(_Pc(16 * i, s, samples=(samples or {}).get(i, 0)) for i, s in enumerate(sass))


CHAIN = ("WARPGROUP.ARRIVE", "QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR28], RZ, !UPT",
         "QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR32], R24",
         "QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR44], R24.gsb0",
         "WARPGROUP.DEPBAR.LE gsb0, 0x1")
SPLIT = ("WARPGROUP.ARRIVE", "QGMMA.64x128x32.F32.E4M3.E4M3 R88, gdesc[UR16], RZ, !UPT.gsb0",
         "WARPGROUP.DEPBAR.LE gsb0, 0x0", "WARPGROUP.ARRIVE", "MOV R18, UR9",
         "QGMMA.64x128x32.F32.E4M3.E4M3 R88, gdesc[UR28], R88.gsb0", "WARPGROUP.DEPBAR.LE gsb0, 0x0",
         "WARPGROUP.ARRIVE", "HGMMA.64x128x16.F32.BF16 R24, R228, gdesc[UR16], R24.gsb0",
         "WARPGROUP.DEPBAR.LE gsb0, 0x0")


def test_a_chain_waited_once_is_not_split_one_split_by_full_waits_is() -> None:
    s = serialized(_P(*CHAIN))
    assert s is not None and s.links == 200 and s.split == 0 and s.ratio == 0
    s = serialized(_P(*SPLIT, samples={2: 5, 3: 2, 4: 1, 6: 40}))
    # R88's second slice follows a full wait after its first (with an arrive and a move between); the HGMMA into
    # R24 starts another chain (its accumulator is a running O, not the slice before it): not a link
    assert s is not None and s.links == 100 and s.split == 100 and s.ratio == 1.0
    assert s.wait_samples == 8 and s.lines == (("k.py", 7),)
    assert serialized(_P("FFMA R1, R2, R3, R4", "MUFU.EX2 R5, R6")) is None
    assert serialized(object()) is None


needs_ncu = pytest.mark.skipif(__import__("importlib").util.find_spec("ncu_report") is None,
                               reason="ncu_report is not installed")


@cache
def _profile(path: str, kernel: str):  # type: ignore[no-untyped-def]
    from profctl.readers.ncu_profiles import read_profiles

    return next(p for p in read_profiles(path, kernels=[kernel]) if not p.names_only)


def _explain(store: Path, *args: str) -> dict:
    r = CliRunner().invoke(app, ["explain", *args, "--reports", str(store), "-f", "json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


@needs_ncu
def test_the_planted_kernel_reads_serialized_and_its_fix_and_other_kernels_do_not() -> None:
    carried = serialized(_profile(PLANT, "plant@serial-carried"))
    assert carried is not None and carried.ratio == 1.0
    assert any(f.endswith("gluon_fp8_attention.py") for f, _ in carried.lines)
    for path, kernel in ((PLANT, "plant@serial-fixed"), (AHEAD, "fwd@m64n128w4s3-gl$"),
                         (str(DATA / "ladder_ws.ncu-rep.xz"), "s4096/cudnn"),
                         (str(DATA / "ladder_ws.ncu-rep.xz"), "s4096/m128n128w4s3-ws-gl$"),
                         (str(DATA / "ladder_ws.ncu-rep.xz"), "fp8s4096/m64n128w4s3$")):
        s = serialized(_profile(path, kernel))
        assert s is not None and s.links > 0 and s.split == 0, (kernel, s)


@needs_ncu
def test_explain_names_mma_serialized_not_the_overlap_the_kernel_already_asks_for(tmp_path: Path) -> None:
    d = _explain(tmp_path, PLANT, "-k", "plant@serial-carried")
    ids = [c["id"] for c in d["causes"]]
    assert ids[0] == "mma-serialized" and "mma-not-overlapped" not in ids, ids
    c = d["causes"][0]
    assert c["saving_us"] == pytest.approx(42.2, abs=1.0)
    assert "C7514" in c["fix"] + c["note"] and any("gluon_fp8_attention.py" in ln["file"] for ln in c["lines"])
    # its fix: the wgmma run asynchronously again, and nothing names the fault
    fixed = _explain(tmp_path, PLANT, "-k", "plant@serial-fixed")
    assert "mma-serialized" not in [c["id"] for c in fixed["causes"]]


@needs_ncu
def test_before_after_scores_the_prediction_within_35_percent(tmp_path: Path) -> None:
    _explain(tmp_path, PLANT, "-k", "plant@serial-carried")
    r = CliRunner().invoke(app, ["explain", PLANT, PLANT, "-k", "plant@serial-carried", "--vs",
                                 "plant@serial-fixed", "--changed", "--reports", str(tmp_path)])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "mma-serialized went away: predicted to save 42.2 us, realized 44.2 us (within 35 %)" in text, text


@needs_ncu
def test_a_kernel_serialized_for_want_of_registers_is_told_to_stop_spilling_first() -> None:
    """The causal Q·Kᵀ-ahead kernel (tests/data/ladder50/fp8_ahead_causal.ncu-rep.xz) needs 255 registers and spills;
    ptxas serialized its wgmma for that (C7512), not for a touched accumulator. Recorded after the detector was
    written: its chains read split all the same, the cause says the spills come first, and the one-warpgroup kernel
    beside it in the report reads unsplit."""
    from profctl.analysis.cause_context import Context
    from profctl.analysis.cause_waits import waits

    causal = str(DATA / "fp8_ahead_causal.ncu-rep.xz")
    p = _profile(causal, "fwd@m64n128w4s3-pipe-gl$")
    s = serialized(p)
    assert s is not None and s.ratio == 1.0
    (c,) = [c for c in waits(Context.of(p)) if c.id == "mma-serialized"]
    assert any("spills" in e and "C7512" in e for e in c.evidence) and c.fix.startswith("lower the register pressure")
    plain = serialized(_profile(causal, "fwd@m64n128w4s3-gl$"))
    assert plain is not None and plain.split == 0


@needs_ncu
def test_latency_bound_on_a_wgmma_forward_says_what_interleaving_two_tiles_did(tmp_path: Path) -> None:
    """Ladder step 17 (tests/data/ladder50/fp8_ahead.ncu-rep.xz): explain's latency-bound fix for the one-warpgroup
    FP8 kernel, "interleave two tiles", was followed (the Q·Kᵀ-ahead kernel, unserialized) and lost 19 us under
    ncu. Its note now says so, measured, beside the fix."""
    d = _explain(tmp_path, AHEAD, "-k", "fwd@m64n128w4s3-gl$")
    c = d["causes"][0]
    assert c["id"] == "latency-bound" and "interleave two tiles" in c["fix"]
    assert "measured not to pay" in c["note"] and "6 % slower" in c["note"]
    b = _explain(tmp_path, AHEAD, AHEAD, "-k", "fwd@m64n128w4s3-gl$", "--vs", "fwd@m64n128w4s3-pipe-gl$", "--changed")
    assert b["gap_us"] < 0 or b["a"]["duration_us"] < b["b"]["duration_us"]
