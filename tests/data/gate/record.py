"""Records the gate test's runs: `profctl torch -- python examples/ops_program.py`, each a fresh process, on the
2-core CPU machine while spinning processes keep both cores busy (as a shared CI machine would), then keeps what
`profctl compare` reads of each run directory (manifest.json, summary.json).

    python tests/data/gate/record.py OUTDIR --base 4 --slow 3 --load 2

OPS_SLOW=softmax makes the program's softmax run over twice the rows and nothing else change (the planted
slowdown); the base runs are the unchanged program.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _spin(stop: float) -> None:
    x = 0
    while time.time() < stop:
        x += 1


def record(store: Path, out: Path, name: str, slow: bool) -> None:
    before = set(store.iterdir()) if store.exists() else set()
    env = {**os.environ, "OPS_SLOW": "softmax" if slow else ""}
    subprocess.run([sys.executable, "-m", "profctl", "torch", "--reports", str(store), "-f", "json", "--",
                    sys.executable, str(ROOT / "examples" / "ops_program.py")], check=True, env=env,
                   stdout=subprocess.DEVNULL, timeout=600)
    (run,) = set(store.iterdir()) - before
    dst = out / name
    dst.mkdir(parents=True)
    for f in ("manifest.json", "summary.json"):
        shutil.copy(run / f, dst / f)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=Path)
    p.add_argument("--base", type=int, default=4)
    p.add_argument("--slow", type=int, default=3)
    p.add_argument("--load", type=int, default=2)
    a = p.parse_args()
    store = Path(tempfile.mkdtemp(prefix="gate-record-"))
    spinners = [mp.Process(target=_spin, args=(time.time() + 3600,)) for _ in range(a.load)]
    for s in spinners:
        s.start()
    try:
        # interleaved (base, slow, base, slow, ...), so a drift of the machine falls on both kinds
        for i in range(max(a.base, a.slow)):
            if i < a.base:
                record(store, a.out, f"base-{i + 1}", False)
            if i < a.slow:
                record(store, a.out, f"slow-{i + 1}", True)
    finally:
        for s in spinners:
            s.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
