"""The warm workload process's loop (workloads/serve.py): a batch at a time, each batch's events and an ``idle``
line in the file the request names, status 2 for a request that is not one, 3 (and no further batch) after a
batch that broke the CUDA context; and the attention workload under --serve, a real child fed on stdin."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from profctl.workloads.serve import serve


def test_batches_write_their_events_and_idle(tmp_path: Path) -> None:
    ran: list[list[int]] = []

    def batch(cases, emit):  # type: ignore[no-untyped-def]
        ran.append(list(cases))
        for i in cases:
            emit({"event": "row", "index": i})
        return 0

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    reqs = [json.dumps({"cases": [0, 2], "jsonl": str(a)}), "", json.dumps({"cases": [1], "jsonl": str(b)})]
    assert serve(batch, lambda: {"event": "device", "name": "cpu"}, reqs) == 0
    assert ran == [[0, 2], [1]]
    ev = [json.loads(x)["event"] for x in a.read_text().splitlines()]
    assert ev == ["device", "row", "row", "idle"]
    assert [json.loads(x)["event"] for x in b.read_text().splitlines()] == ["device", "row", "idle"]


def test_a_bad_request_and_a_broken_context(tmp_path: Path) -> None:
    assert serve(lambda c, e: 0, dict, ["not json"]) == 2
    reqs = [json.dumps({"cases": [0], "jsonl": str(tmp_path / "x")})] * 3
    calls: list[int] = []
    assert serve(lambda c, e: calls.append(1) or 3, dict, reqs) == 3
    assert len(calls) == 1


def test_the_attention_workload_serves_batches_on_stdin(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    stdin = "".join(json.dumps({"cases": c, "jsonl": str(p)}) + "\n" for c, p in (([0, 1], a), ([2], b)))
    r = subprocess.run([sys.executable, "-m", "profctl.workloads.attention", "--serve", "--backend", "sdpa-math,eager",
                        "--seqlen", "16,24", "--heads", "2", "--head-dim", "8", "--device", "cpu", "--iters", "2",
                        "--warmup", "0"], input=stdin, text=True, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in a.read_text().splitlines() if json.loads(x)["event"] == "row"]
    assert [x["index"] for x in rows] == [0, 1] and all(x["status"] == "ok" for x in rows)
    assert [json.loads(x)["event"] for x in b.read_text().splitlines()][-1] == "idle"
    assert r.stdout.count("serve: batch of") == 2
