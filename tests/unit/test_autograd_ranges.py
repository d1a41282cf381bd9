"""Issue 39 item 10: a backward range that nsys (or torch) projects to 0 ns on the GPU while the trace has kernels
says why in the range table: autograd's worker thread launched its kernels, not the thread that pushed the range.

attn.sqlite (shared fixture) is a plain script's capture: `<name>.bwd.itN` pushed on the main thread only, so
every backward range projects 0 ns. profctl's own captures (profctl_bwd_nvtx.sqlite, nsys_profctl_fwdbwd.sqlite)
push `<backend>.bwd` on autograd's thread as well, so none of their ranges is marked; with the autograd thread's
ranges deleted from a copy they read as a user's program does.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from profctl import readers
from profctl.render import summary_view
from profctl.render.summary_view import AUTOGRAD_MARK, autograd_note, range_rows
from profctl.render.tables import numeric_columns
from profctl.schema import KernelRow, RangeRow, Source, Summary

Get = Callable[[str], Path]


def _marked(rows: list[dict]) -> list[str]:
    return [r["range"] for r in rows if str(r["GPU projected"]).endswith(AUTOGRAD_MARK)]


def _without_autograd_ranges(db: Path) -> Path:
    """The capture as a user's program makes it: no NVTX range on autograd's worker thread."""
    c = sqlite3.connect(db)
    c.execute("DELETE FROM NVTX_EVENTS WHERE globalTid IN (SELECT n.globalTid FROM ThreadNames n "
              "JOIN StringIds s ON s.id = n.nameId WHERE s.value LIKE 'pt_autograd%')")
    c.commit()
    c.close()
    return db


def test_a_plain_script_s_backward_ranges_say_why_they_project_0_ns(shared_fixture: Get) -> None:
    s = readers.read(shared_fixture("attn.sqlite"))
    rows = range_rows(s)
    marked = _marked(rows)
    assert sorted(marked) == sorted(r.name for r in s.ranges if ".bwd." in r.name) and len(marked) == 6
    assert all(str(r["GPU projected"]) == f"0 ns {AUTOGRAD_MARK}" for r in rows if r["range"] in marked)
    # a forward range and cuBLAS's own 0-ns range (no GPU op at all, not a backward pass) are left alone
    assert not any(r["range"].startswith(("naive.fwd", "cublasCreate")) for r in rows if r["range"] in marked)
    assert "GPU projected" in numeric_columns(rows)  # the mark keeps the column right-aligned
    note = autograd_note(s, rows)
    assert note and note.startswith(f"{AUTOGRAD_MARK} naive.bwd.it0")
    assert "launched by autograd's worker thread, not the thread that pushed the range" in note
    assert "--by-range places them under the range" in note  # no per-range kernel rows read: how to get them
    md = summary_view.to_markdown(s)
    assert f"0 ns {AUTOGRAD_MARK} |" in md and "autograd's worker thread" in md
    page = summary_view.to_html(s)
    assert "autograd&#x27;s worker thread" in page and f"0 ns {AUTOGRAD_MARK}</td>" in page


def test_by_range_the_note_points_at_the_kernels(shared_fixture: Get) -> None:
    s = readers.read(shared_fixture("attn.sqlite"), by_range=True)
    note = autograd_note(s, range_rows(s))
    assert note and "the kernels table lists them under the range" in note


def test_the_console_table_carries_the_note(shared_fixture: Get) -> None:
    from profctl.render.tables import text_console

    s = readers.read(shared_fixture("attn.sqlite"))
    con, buf = text_console(400)
    summary_view.to_console(s, con)
    out = buf.getvalue()
    assert f"0 ns {AUTOGRAD_MARK}" in out and "autograd's worker thread" in out


@pytest.mark.parametrize("name", ["profctl_bwd_nvtx.sqlite", "nsys_profctl_fwdbwd.sqlite"])
def test_profctl_captures_project_their_backward(data_file: Get, name: str) -> None:
    """profctl's workload pushes `<backend>.bwd` on autograd's thread too: projected, nothing marked; the same
    capture without those ranges is a user's program, and its `.bwd` ranges are marked."""
    db = data_file(name)
    s = readers.read(db, by_range=True)
    assert not _marked(range_rows(s)) and autograd_note(s, range_rows(s)) is None
    bwd = [r for r in s.ranges if r.name.endswith(".bwd")]
    assert bwd and all(r.gpu_proj_total_ns for r in bwd)
    s = readers.read(_without_autograd_ranges(db), by_range=True)
    rows = range_rows(s)
    assert sorted(_marked(rows)) == sorted(r.name for r in s.ranges if r.name.endswith(".bwd"))
    assert not any(n.endswith(".fwd") for n in _marked(rows))
    note = autograd_note(s, rows)
    assert note and "the kernels table lists them under the range" in note


def _summary(ranges: list[RangeRow], kernels: bool = True) -> Summary:
    k = KernelRow(tool="torch", name="flash_bwd_kernel", short_name="flash_bwd_kernel", kernel_class="flash_bwd",
                  nvtx_range=None, count=1, total_ns=1e5, avg_ns=1e5, med_ns=1e5, min_ns=1e5, max_ns=1e5, std_ns=0)
    return Summary(sources=(Source("trace.json", "torch", "2.9"),), kernels=(k,) if kernels else (),
                   ranges=tuple(ranges))


def _range(name: str, proj: float | None, ops: int | None) -> RangeRow:
    return RangeRow(name=name, domain=None, style="push_pop", count=1, range_total_ns=1e6, gpu_proj_total_ns=proj,
                    gpu_ops=ops)


def test_which_ranges_are_marked() -> None:
    s = _summary([_range("loss.backward", 0.0, 0), _range("step_bwd", 0.0, 0), _range("model.fwd", 0.0, 0),
                  _range("train.bwd", 5e5, 3), _range("backward_cpu_only", None, None),
                  _range("bwdish", 0.0, 0)])
    assert sorted(_marked(range_rows(s))) == ["loss.backward", "step_bwd"]
    # no kernel in the trace: nothing was launched anywhere, so no thread is to blame
    assert not _marked(range_rows(_summary([_range("loss.backward", 0.0, 0)], kernels=False)))


def test_a_backward_range_with_autograd_kernels_placed_under_it_is_marked_in_both_gpu_columns() -> None:
    """tests/data/ranges: train/backward pushed on the main thread, its GEMMs launched by autograd's thread. Its own
    thread launched one tiny kernel, so it is not 0 ns, yet its projection and busy share (0 %) leave out the
    backward's kernels, which the by-range reading places under it: both columns carry the mark, and the note says
    where the kernels are and that explain --range counts them."""
    data = Path(__file__).resolve().parents[1] / "data" / "ranges" / "ranges.sqlite.xz"
    s = readers.read(data, by_range=True)
    rows = {r["range"]: r for r in range_rows(s)}
    bwd = rows["train/backward"]
    assert str(bwd["GPU projected"]).endswith(AUTOGRAD_MARK) and str(bwd["GPU busy"]).endswith(AUTOGRAD_MARK)
    assert not str(rows["train/forward"]["GPU busy"]).endswith(AUTOGRAD_MARK)
    note = autograd_note(s, list(rows.values()))
    assert note and "train/backward" in note and "explain RUN --range NAME" in note
    assert "the kernels table lists them under the range" in note
