"""Benchmark: the BaseConv GD construction against baselines measured in the same process.

For the non-causal BaseConv GD construction (seed 000 App. D.3.1,
``constructions.gd_baseconv.gd_baseconv``; N=20, D=5 gives T=21 tokens x C=27
channels) at several batch sizes, all in torch (float32, CPU by default), it
times

* ``construction (ops, direct)``: the stack run through ``Layer.forward`` (the
  toolkit's path, ``constructions/ops.py``), direct convolution;
* ``construction (ops, fft)``: the same with ``conv_method="fft"``;
* ``straightforward torch``: the same layers as an ML user writes BaseConv
  (zoology / H3 style): ``nn.Linear`` projections and an FFT long convolution,
  weights loaded from the construction (checked to give the same output);
  (``Backend.cast_layer`` plans each layer once, ``BaseConv.prepare``: lag-0
  channels are products, uniform filters sums, zero bias matrices skipped);
* ``GEMM, same shapes``: plain batched matmuls of exactly the layer's shapes
  (three (B*T, C) x (C, C) projections and the convolution as C batched
  (T, T) x (T, B) products), the attainable rate for these shapes;
* ``GEMM, large``: one 2048 x 2048 x 2048 matmul, the machine's GEMM peak.

It reports problems x layers per second and GFLOP/s, counting for every
implementation the same work, ``BaseConv.flops()`` (direct convolution), and
quotes ratios against the baselines.  Example::

    python bench/bench_construction.py --batches 256,1024,4096 --layers 31
    python bench/bench_construction.py --device cuda
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from constructions import ops  # noqa: E402
from constructions.gd_baseconv import gd_baseconv  # noqa: E402
from constructions.layers import BaseConv  # noqa: E402
from numerics.backends import Backend  # noqa: E402
from numerics.problems import sample_ls  # noqa: E402


# ------------------------------------------------------------------ baselines

class TorchBaseConv(nn.Module):
    """One BaseConv layer (seed 000 eq. (2)) written the way an ML user writes it.

    ``nn.Linear`` projections (weight = W^T; their per-channel bias is 0 here),
    the construction's position-dependent bias matrices as parameters, and an
    FFT long convolution over the token axis in (B, C, T) layout as in H3 /
    Hyena / zoology: rfft of input and filter, product, irfft.  ``causal``:
    zero-padded to 2T (linear convolution); else length T (circular).
    """

    def __init__(self, layer: BaseConv, dtype, device):
        super().__init__()
        T, C = layer.shape
        self.T, self.causal = T, layer.causal
        f = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float64), dtype=dtype, device=device)  # noqa: E731
        lin = lambda W: self._linear(f(W), C, dtype, device)  # noqa: E731
        self.in_proj, self.gate_proj, self.out_proj = lin(layer.W_in.astype(float)), lin(
            layer.W_gate.astype(float)), lin(layer.W_out.astype(float))
        self.filter = nn.Parameter(f(layer.h.astype(float)).T.contiguous(), requires_grad=False)  # (C, T)
        self.b_in = nn.Parameter(f(layer.b_in.astype(float)), requires_grad=False)
        self.b_conv = nn.Parameter(f(layer.b_conv.astype(float)), requires_grad=False)
        self.b_gate = nn.Parameter(f(layer.b_gate.astype(float)), requires_grad=False)
        self.b_out = nn.Parameter(f(layer.b_out.astype(float)), requires_grad=False)

    @staticmethod
    def _linear(W, C, dtype, device):
        lin = nn.Linear(C, C, bias=True, dtype=dtype, device=device)
        with torch.no_grad():
            lin.weight.copy_(W.T)
            lin.bias.zero_()
        lin.requires_grad_(False)
        return lin

    def fftconv(self, v):  # v (B, T, C)
        L = v.shape[-2]
        n = 2 * L if self.causal else L
        k_f = torch.fft.rfft(self.filter, n=n)  # (C, n//2+1)
        v_f = torch.fft.rfft(v.transpose(-1, -2), n=n)  # (B, C, n//2+1)
        return torch.fft.irfft(v_f * k_f, n=n)[..., :L].transpose(-1, -2)

    def forward(self, u):
        z = self.fftconv(self.in_proj(u) + self.b_in) + self.b_conv
        g = self.gate_proj(u) + self.b_gate
        return self.out_proj(g * z) + self.b_out


# ------------------------------------------------------------------ timing

def _sync(device):
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def time_round_robin(fns: dict, device, repeats: int) -> dict:
    """Best (minimum) and median wall time of each function, timed in turns.

    Round-robin so that a transient stall of the machine (a shared VM shows
    multi-second ones) hits every implementation alike; the minimum is the
    estimate of the undisturbed time.
    """
    for f in fns.values():  # warm-up: allocations, kernel selection
        f()
        f()
    _sync(device)
    ts = {name: [] for name in fns}
    for _ in range(repeats):
        for name, f in fns.items():
            t0 = time.perf_counter()
            f()
            _sync(device)
            ts[name].append(time.perf_counter() - t0)
    return {name: (min(v), float(np.median(v))) for name, v in ts.items()}


def breakdown(layer: BaseConv, u, device, repeats: int) -> dict:
    """Time of each piece of one ``BaseConv.forward`` (the toolkit's ops path)."""
    L = layer
    v = ops.add(ops.mm(u, L.W_in), L.b_in)
    plan = ops.ConvPlan(L.h, causal=L.causal)
    z = ops.conv(v, L.h, causal=L.causal)
    g = ops.add(ops.mm(u, L.W_gate), L.b_gate)
    pieces = {
        "u W_in + b_in": lambda: ops.add(ops.mm(u, L.W_in), L.b_in),
        "conv (direct, planned: ops.ConvPlan)": lambda: plan(v),
        "conv (direct, unplanned: (T,T,C) Toeplitz + einsum)": lambda: ops.conv(v, L.h, causal=L.causal),
        "conv (fft)": lambda: ops.conv(v, L.h, causal=L.causal, method="fft"),
        "+ b_conv": lambda: ops.add(z, L.b_conv),
        "u W_gate + b_gate": lambda: ops.add(ops.mm(u, L.W_gate), L.b_gate),
        "gate * conv": lambda: ops.hadamard(g, z),
        "(.) W_out + b_out": lambda: ops.add(ops.mm(ops.hadamard(g, z), L.W_out), L.b_out),
    }
    return {k: t for k, (t, _) in time_round_robin(pieces, device, repeats).items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="256,1024,4096")
    ap.add_argument("--layers", type=int, default=31, help="depth 1 + 3k of the GD stack (default 31)")
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--d", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64", "bfloat16", "float16"])
    ap.add_argument("--repeats", type=int, default=7, help="timed runs per implementation (minimum reported)")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--json", help="write the results as JSON")
    a = ap.parse_args(argv)
    try:
        batches = [int(t) for t in a.batches.split(",") if t.strip()]
        if not batches or min(batches) < 1 or a.repeats < 1:
            raise ValueError
    except ValueError:
        print(f"error: --batches must be positive integers and --repeats >= 1, got {a.batches!r}", file=sys.stderr)
        return 2
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("error: --device cuda requested but torch sees no CUDA GPU", file=sys.stderr)
        return 2
    if a.threads:
        torch.set_num_threads(a.threads)
    con = gd_baseconv(a.n, a.d)
    try:
        k = con.steps_for_depth(a.layers)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    be = Backend("torch", a.dtype, a.device)
    dt = getattr(torch, a.dtype)
    stack = con.layers(k)
    T, C = con.layout.shape
    cast = {id(L): be.cast_layer(L) for L in stack}
    tlayers = {id(L): TorchBaseConv(L, dt, a.device) for L in stack}
    flops_problem = sum(L.flops() for L in stack)
    dev_name = torch.cuda.get_device_name() if a.device.startswith("cuda") else f"CPU, {torch.get_num_threads()} torch threads"
    print(f"{con.name}: {len(stack)} layers (1 + 3 x {k}), state T={T} x C={C}, {a.dtype} on {a.device} ({dev_name}); "
          f"torch {torch.__version__}")
    print(f"flops per problem through the stack: {flops_problem} (BaseConv.flops(), direct convolution)")

    # machine GEMM peak (large square)
    M = 2048
    X = torch.randn(M, M, dtype=dt, device=a.device)
    Y = torch.randn(M, M, dtype=dt, device=a.device)
    t_big = time_round_robin({"gemm": lambda: X @ Y}, a.device, a.repeats)["gemm"][0]
    peak_big = 2 * M ** 3 / t_big / 1e9
    print(f"GEMM, large ({M}^3): {peak_big:.1f} GFLOP/s")
    del X, Y

    results = []
    hdr = (f"{'batch':>6} {'implementation':<30} {'time (s)':>9} {'problems*layers/s':>18} {'GFLOP/s':>8} "
           f"{'vs straightforward':>18} {'of GEMM same shapes':>19} {'of GEMM large':>13}")
    print(hdr)
    for B in batches:
        P = sample_ls(B, a.n, a.d, seed=0)
        q = np.random.default_rng(1).standard_normal((B, a.d))
        S0 = be.asarray(con.input_state({"A": P.A, "b": P.b, "x": P.x0, "q": q}))

        def run_ops(method):
            def f():
                S = S0
                for L in stack:
                    S = cast[id(L)].forward(S, conv_method=method)
                return S
            return f

        def run_torch():
            S = S0
            for L in stack:
                S = tlayers[id(L)](S)
            return S

        # same-shape GEMMs: 3 projections + the convolution as C batched (T,T)x(T,B) products, per layer
        U = torch.randn(B * T, C, dtype=dt, device=a.device)
        W = torch.randn(C, C, dtype=dt, device=a.device)
        K = torch.randn(C, T, T, dtype=dt, device=a.device)
        V = torch.randn(C, T, B, dtype=dt, device=a.device)

        def run_gemm():
            for _ in stack:
                U @ W
                U @ W
                U @ W
                torch.bmm(K, V)

        with torch.inference_mode():
            ref = run_ops("direct")()
            diffs = {"fft": float((run_ops("fft")() - ref).abs().max()),
                     "straightforward": float((run_torch() - ref).abs().max())}
            tm = time_round_robin({
                "construction (ops, direct)": run_ops("direct"),
                "construction (ops, fft)": run_ops("fft"),
                "straightforward torch": run_torch,
                "GEMM, same shapes": run_gemm,
            }, a.device, a.repeats)
            times = {k: t for k, (t, _) in tm.items()}
            medians = {k: m for k, (_, m) in tm.items()}
            parts = breakdown(cast[id(con.body[2])], S0, a.device, a.repeats) if B == max(batches) else None
        work = B * flops_problem
        t_straight = times["straightforward torch"]
        gemm_rate = work / times["GEMM, same shapes"] / 1e9
        row = {"batch": B, "layers": len(stack), "flops": work, "max_abs_diff_vs_direct": diffs, "impl": {}}
        for name, t in times.items():
            rate = work / t / 1e9
            row["impl"][name] = {"seconds": t, "median_seconds": medians[name], "problems_layers_per_s": B * len(stack) / t, "gflops": rate,
                                 "speedup_vs_straightforward": t_straight / t,
                                 "fraction_of_gemm_same_shapes": rate / gemm_rate,
                                 "fraction_of_gemm_large": rate / peak_big}
            print(f"{B:>6} {name:<30} {t:>9.4f} {B * len(stack) / t:>18.3e} {rate:>8.2f} "
                  f"{t_straight / t:>17.2f}x {rate / gemm_rate:>19.3f} {rate / peak_big:>13.4f}")
        print(f"{'':>6} max |difference| to the direct construction output: "
              + ", ".join(f"{k} {v:.2e}" for k, v in diffs.items()))
        if parts is not None:
            row["breakdown_body_layer3"] = parts
            print(f"{'':>6} one layer (body layer 3, all-ones circulant filter on the s2 channels), batch {B}: "
                  + ", ".join(f"{k} {1e3 * v:.2f} ms" for k, v in parts.items()))
        results.append(row)
        del U, V, K, S0
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"device": a.device, "device_name": dev_name, "dtype": a.dtype, "torch": torch.__version__,
                       "layers": len(stack), "T": T, "C": C, "flops_per_problem": flops_problem,
                       "gemm_large_gflops": peak_big, "results": results}, fh, indent=1)
        print(f"written {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
