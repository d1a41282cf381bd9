"""A Triton kernel with a planted hot line inside Triton's inlined helpers, and a plain exp-bound line.

`row_stats` reduces each row of a (rows, 256) tile many times with `tl.sum` (the planted line, marked PLANT:
tl.sum): Triton inlines `tl.sum` from triton/language/standard.py, so ncu's line information puts most samples
there; profctl must show them under the line below that called `tl.sum`. `exp_rows` spends its time in tl.exp
(marked PLANT: tl.exp). Plain script, independent of profctl; record.sh beside this file runs it under ncu.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def row_stats(X, Out, n_rows, REPS: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK_C)
    x = tl.load(X + rows[:, None] * BLOCK_C + cols[None, :], mask=rows[:, None] < n_rows, other=0.0)
    acc = tl.zeros([BLOCK_R], dtype=tl.float32)
    for r in range(REPS):
        acc += tl.sum(x * (r + 1.0), axis=1)  # PLANT: tl.sum
    tl.store(Out + rows, acc, mask=rows < n_rows)


@triton.jit
def exp_rows(X, Out, n_rows, REPS: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK_C)
    x = tl.load(X + rows[:, None] * BLOCK_C + cols[None, :], mask=rows[:, None] < n_rows, other=0.0)
    for _ in range(REPS):
        x = tl.exp(x * -0.5)  # PLANT: tl.exp
    tl.store(Out + rows[:, None] * BLOCK_C + cols[None, :], x, mask=rows[:, None] < n_rows)


def main() -> None:
    rows, cols = 132 * 64, 256
    x = torch.randn(rows, cols, device="cuda")
    out = torch.empty(rows, device="cuda")
    out2 = torch.empty_like(x)
    grid = (triton.cdiv(rows, 16),)
    row_stats[grid](x, out, rows, REPS=64, BLOCK_R=16, BLOCK_C=cols)
    exp_rows[grid](x, out2, rows, REPS=256, BLOCK_R=16, BLOCK_C=cols)
    torch.cuda.synchronize()
    print("ok", float(out.sum()), float(out2.sum()))


if __name__ == "__main__":
    main()
