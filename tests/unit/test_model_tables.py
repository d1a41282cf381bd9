"""The seeds' model tables from GPT training rows recorded on the H100 (tests/data/model_gpt_train_h100.json.gz)."""

from __future__ import annotations

import gzip
import json

from profctl.analysis.model_tables import TIMER_NOTE, tables, train_split
from tests.conftest import DATA


def _rows() -> list[dict]:
    with gzip.open(DATA / "model_gpt_train_h100.json.gz", "rt") as f:
        return json.load(f)


def test_the_training_split_is_forward_backward_optimizer_and_says_what_the_timer_added() -> None:
    rows = _rows()
    split = {t["model"]: t for t in train_split(rows)}
    assert set(split) == {"gpt-sm", "gpt-md", "gpt-lg"}
    by = {(r["model"], r["backend"]): r for r in rows}
    for (model, backend), r in by.items():
        cell = split[model][backend]
        assert cell.startswith(f"{r['forward_ms']:.2f} / {r['backward_ms']:.2f} / {r['optimizer_ms']:.2f}")
        assert ("timer +" in cell) == (r["part_timing_cost"] > TIMER_NOTE)
    # eager attention keeps the GPU busy: the timer adds ~1 %; SDPA's shorter kernels leave its host cost exposed
    assert "timer" not in split["gpt-lg"]["eager"] and "(timer +22%)" in split["gpt-lg"]["sdpa-flash"]


def test_every_seed_table_of_training_rows_is_there() -> None:
    titles = [t for t, _ in tables(_rows())]
    assert titles == ["Step time (ms, median)", "MFU and attention's share of the step",
                      "Training step: forward / backward / optimizer (ms, part-timed steps)",
                      "Peak memory (GiB) against context", "Training samples/s per batch x context"]
