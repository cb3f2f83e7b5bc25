"""Times PyTorch's CPU matmul in float32 and bfloat16 on GEMM shapes given
as hilbert bench gemm takes them (MxNxK[:ab], a and b each n or t: op(A) is
A or A^T, op(B) B or B^T, stored as Hilbert stores them), so that
scripts/parity/gemm_bf16.sh can put them beside Hilbert's in one run.

Usage: /usr/bin/python3 scripts/parity/gemm.py [-threads N] [-reps R] SHAPES
Prints one JSON line per shape: torch_f32_gflops, torch_bf16_gflops (best
of R timed repetitions, after one warm-up) and their medians.
"""
import json
import os
import sys
import time

import torch


def parse(shape):
    dims, _, ops = shape.partition(":")
    m, n, k = (int(x) for x in dims.lower().split("x"))
    ops = ops or "nn"
    return m, n, k, ops[0] == "t", ops[1] == "t"


def operands(m, n, k, ta, tb, dtype):
    """op(A) (m x k) and op(B) (k x n) as views of the stored matrices."""
    g = torch.Generator().manual_seed(1)
    a = torch.rand((k, m) if ta else (m, k), generator=g) * 2 - 1
    b = torch.rand((n, k) if tb else (k, n), generator=g) * 2 - 1
    a, b = a.to(dtype), b.to(dtype)
    return (a.t() if ta else a), (b.t() if tb else b)


def rates(m, n, k, ta, tb, dtype, reps):
    a, b = operands(m, n, k, ta, tb, dtype)
    torch.matmul(a, b)  # warm up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        torch.matmul(a, b)
        times.append(time.perf_counter() - t0)
    times.sort()
    flops = 2.0 * m * n * k
    return round(flops / times[0] / 1e9, 3), round(flops / times[len(times) // 2] / 1e9, 3)


def main():
    args = sys.argv[1:]
    threads, reps = os.cpu_count(), 10
    while args and args[0].startswith("-"):
        flag, value = args[0], args[1]
        args = args[2:]
        if flag == "-threads":
            threads = int(value)
        elif flag == "-reps":
            reps = int(value)
        else:
            sys.exit(f"gemm.py: unknown flag {flag}")
    torch.set_num_threads(threads)
    for shape in ",".join(args).split(","):
        if not shape:
            continue
        m, n, k, ta, tb = parse(shape)
        f32, f32_med = rates(m, n, k, ta, tb, torch.float32, reps)
        bf16, bf16_med = rates(m, n, k, ta, tb, torch.bfloat16, reps)
        print(json.dumps({"shape": shape, "threads": torch.get_num_threads(), "torch": torch.__version__,
                          "torch_f32_gflops": f32, "torch_f32_gflops_median": f32_med,
                          "torch_bf16_gflops": bf16, "torch_bf16_gflops_median": bf16_med}), flush=True)


if __name__ == "__main__":
    main()
