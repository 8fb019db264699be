"""Benchmark: the BaseConv GD construction's float forward against a fair baseline, with honest FLOP counts.

For the non-causal BaseConv GD construction (seed 000 App. D.3.1,
``constructions.gd_baseconv.gd_baseconv``; N=20, D=5 gives T=21 tokens x C=27
channels, 31 layers by default), at several batch sizes and dtypes, all in
torch (CPU by default), it times, interleaved round by round:

* ``construction (planned direct)``: the stack through ``Layer.forward`` after
  ``Backend.cast_layer`` (``BaseConv.prepare``: an ``ops.ConvPlan`` per layer
  -- lag-0-only channels a scaling, all-equal-tap channels a sum (circular) or
  prefix sum (causal), the rest a Toeplitz/circulant product built once --
  and the identically zero bias matrices skipped);
* ``construction (ops fft, filter FFT per call)``: the same layers with
  ``conv_method="fft"`` (the generic ``ops`` path: every bias added, the FFT of
  the filter taken inside every call by ``ops._conv_fft``);
* ``torch BaseConv, filter FFT precomputed``: **the baseline**, the layer as an
  ML user writes BaseConv (zoology / H3 style): ``nn.Linear`` projections
  (``bias=False``: the construction has no per-channel bias), its four bias
  matrices added, an FFT long convolution over tokens in (B, C, T) layout whose
  filter FFT is taken once per layer at construction time, as any real
  implementation does;
* ``torch BaseConv, filter FFT per call``: the same, recomputing the filter's
  FFT on every call (the baseline this script used before), labelled as such;
* ``GEMM, same shapes``: plain batched matmuls of exactly the layer's shapes
  (three (B*T, C) x (C, C) projections and the convolution as C batched
  (T, T) x (T, B) products): the rate attainable for these shapes;
* the machine's GEMM peak: one numpy ``N x N @ N x N`` (``--gemm-n``, default
  1024, the size of a layer's state at batch ~2000) and the same in torch, in
  the dtype of the configuration, **inside every round** (not once at the
  start), so that each round's rates are compared with the peak of that round.

Each round runs every item once, starting from a rotating position; the
report is the median over rounds (the minimum is in ``--json``), and every
ratio (speedup against the baseline, fraction of the peak) is the median of
the per-round ratios, so that a load change of the shared machine between
rounds cancels.  Time is reported per sample (seconds / batch) as wall time
and as CPU time (``time.process_time()``: user + sys of this process, all its
threads; CPU/wall near the thread count means the threads were busy, well
below it that the process waited for a core).

Threads: one by default (``--threads 1``: torch's intra-op threads and
numpy's OpenBLAS).  On a 2-core machine shared with other jobs, two threads
per library make every small parallel region wait at its barrier for a
descheduled thread (a 256^3 float32 matmul measured 2 GFLOP/s with two torch
threads beside 100 with one), and numpy's and torch's thread pools, each
spinning after its calls, slow each other down when interleaved.
``--threads 0`` keeps the libraries' defaults.

FLOPs (per sample, summed over the layers; ``T`` tokens, ``C`` channels):

* **nominal** (the dense formula, ``BaseConv.flops()``, the same for every
  implementation, the count the old script credited everyone with):
  ``3 * 2 T C^2`` (three dense projections) + ``2 T^2 C`` (direct circular
  convolution; causal ``T (T+1) C``) + ``6 T C`` (elementwise passes);
* **useful** (the work the implementation actually does; a 1-flop
  multiply or add each):

  - construction (planned direct): ``3 * 2 T C^2`` (the projections are dense
    GEMMs whatever the weights' sparsity) + per channel class of the layer's
    ``ConvPlan``: scaling channels ``T * C_s`` (one multiply per entry), sum
    channels ``T * C_u`` circular (``T-1`` adds + 1 multiply by the tap) or
    ``(2T - 1) C_u`` causal (prefix sum + ``T`` multiplies), dense channels
    ``2 T^2 C_d`` circular / ``T (T+1) C_d`` causal, all-zero filters 0
    + ``T C`` for the gate product + ``T C`` per bias matrix that is not
    identically zero (+ ``T C`` for a residual);
  - FFT paths: ``3 * 2 T C^2`` + ``T C`` per bias matrix (all four) + ``T C``
    gate product + per channel ``2 * 2.5 n log2 n`` (forward and inverse real
    FFT of length ``n`` = ``T`` circular, ``2T`` causal; the usual
    ``5 n log2 n`` complex-FFT convention halved) + ``6 (n//2 + 1)`` (complex
    product); a filter FFT per call adds ``2.5 n log2 n * C / batch``;
  - GEMM, same shapes: ``3 * 2 T C^2 + 2 T^2 C`` (what it multiplies);
  - GEMM peak: ``2 N^3`` per call.

Rates: GFLOP/s on each count (``count * batch / wall``), and the fraction of
the round's GEMM peak (the larger of numpy's and torch's) reached on the
useful count.  Example::

    python bench/bench_construction.py                       # 256,1024,4096 x float32,float64
    python bench/bench_construction.py --quick               # smoke run, a few seconds
    python bench/bench_construction.py --batches 4096 --dtypes float64 --json out/b.json
    python bench/bench_construction.py --device cuda
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from constructions import ops  # noqa: E402
from constructions.gd_baseconv import gd_baseconv  # noqa: E402
from constructions.layers import BaseConv  # noqa: E402
from numerics.backends import Backend  # noqa: E402
from numerics.problems import sample_ls  # noqa: E402

DTYPES = ("float32", "float64", "bfloat16", "float16")
CONSTR = "construction (planned direct)"
CONSTR_ALL = "construction (all channels, dense projections)"
CONSTR_FFT = "construction (ops fft, filter FFT per call)"
BASE = "torch BaseConv, filter FFT precomputed"
BASE_PERCALL = "torch BaseConv, filter FFT per call"
BASE_SPARSE = "torch BaseConv, CSR projections, FFT precomputed"
GEMM_SAME = "GEMM, same shapes"
PEAK_NP = "GEMM peak (numpy)"
PEAK_TORCH = "GEMM peak (torch)"
SHORT = {CONSTR_ALL: "all channels", BASE_SPARSE: "sparse baseline", CONSTR_FFT: "ops fft", BASE: "baseline", BASE_PERCALL: "baseline per call"}


# ------------------------------------------------------------------ baseline

class TorchBaseConv(nn.Module):
    """One BaseConv layer (seed 000 eq. (2)) written the way an ML user writes it.

    ``nn.Linear`` projections (weight = W^T, no per-channel bias: the
    construction has none), the construction's position-dependent bias
    matrices as parameters (always added: a generic layer does not know they
    are zero), and an FFT long convolution over the token axis in (B, C, T)
    layout as in H3 / Hyena / zoology: rfft of the input, product with the
    filter's rfft, irfft.  ``causal``: zero-padded to 2T (linear convolution);
    else length T (circular).  ``filter_fft_per_call=False`` (the fair
    default) takes the filter's rfft once here; ``True`` recomputes it on every
    call.
    """

    def __init__(self, layer: BaseConv, dtype, device, *, filter_fft_per_call: bool = False):
        super().__init__()
        T, C = layer.shape
        self.T, self.causal, self.per_call = T, layer.causal, filter_fft_per_call
        self.residual = layer.residual
        self.n = 2 * T if layer.causal else T
        f = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float64), dtype=dtype, device=device)  # noqa: E731
        lin = lambda W: self._linear(f(W.astype(float)), C, dtype, device)  # noqa: E731
        self.in_proj, self.gate_proj, self.out_proj = lin(layer.W_in), lin(layer.W_gate), lin(layer.W_out)
        self.filter = nn.Parameter(f(layer.h.astype(float)).T.contiguous(), requires_grad=False)  # (C, T)
        # torch's FFT has no half-precision CPU kernels: half dtypes transform in float32 (as ops._conv_fft)
        self.work = dtype if dtype in (torch.float32, torch.float64) else torch.float32
        self.register_buffer("filter_f", torch.fft.rfft(self.filter.detach().to(self.work), n=self.n))  # (C, n//2+1)
        for k in ("b_in", "b_conv", "b_gate", "b_out"):
            setattr(self, k, nn.Parameter(f(getattr(layer, k).astype(float)), requires_grad=False))

    @staticmethod
    def _linear(W, C, dtype, device):
        lin = nn.Linear(C, C, bias=False, dtype=dtype, device=device)
        with torch.no_grad():
            lin.weight.copy_(W.T)
        lin.requires_grad_(False)
        return lin

    def fftconv(self, v):  # v (B, T, C)
        L, n = v.shape[-2], self.n
        k_f = torch.fft.rfft(self.filter.to(self.work), n=n) if self.per_call else self.filter_f
        v_f = torch.fft.rfft(v.transpose(-1, -2).to(self.work), n=n)  # (B, C, n//2+1)
        return torch.fft.irfft(v_f * k_f, n=n)[..., :L].transpose(-1, -2).to(v.dtype)

    def forward(self, u):
        z = self.fftconv(self.in_proj(u) + self.b_in) + self.b_conv
        g = self.gate_proj(u) + self.b_gate
        y = self.out_proj(g * z) + self.b_out
        return u + y if self.residual else y


# torch's CSR tensors announce themselves as beta and unchecked on first use: not this bench's output
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta", category=UserWarning)
warnings.filterwarnings("ignore", message="Sparse invariant checks are implicitly disabled", category=UserWarning)


class SparseTorchBaseConv(TorchBaseConv):
    """The baseline with its three projections as torch CSR matrices (``torch.sparse.mm``): the same
    layer, the zero weights skipped by a generic sparse kernel rather than by the construction's
    plan (equal work to the construction's projections; float32/float64 only: torch has no
    half-precision CSR product on CPU)."""

    def __init__(self, layer: BaseConv, dtype, device):
        super().__init__(layer, dtype, device)
        f = lambda W: torch.as_tensor(np.asarray(W, dtype=np.float64).T.copy(), dtype=dtype,  # noqa: E731
                                      device=device).to_sparse_csr()
        self.sp_in, self.sp_gate, self.sp_out = f(layer.W_in), f(layer.W_gate), f(layer.W_out)

    @staticmethod
    def _mm(Wt, x):  # x (..., C) @ W with W^T held as CSR
        x2 = x.reshape(-1, x.shape[-1])
        return torch.sparse.mm(Wt, x2.T).T.reshape(x.shape[:-1] + (Wt.shape[0],))

    def forward(self, u):
        z = self.fftconv(self._mm(self.sp_in, u) + self.b_in) + self.b_conv
        g = self._mm(self.sp_gate, u) + self.b_gate
        y = self._mm(self.sp_out, g * z) + self.b_out
        return u + y if self.residual else y


# ------------------------------------------------------------------ FLOP counts (per sample)

def rfft_flops(n: int) -> float:
    """One real FFT of length n: half the ``5 n log2 n`` complex-FFT convention."""
    return 2.5 * n * math.log2(n) if n > 1 else 0.0


def _conv_flops(T: int, causal: bool, plan) -> int:
    cs, cu, cd = len(plan.lag0), len(plan.uniform), len(plan.general)
    return T * cs + (T if not causal else 2 * T - 1) * cu + (2 * T * T if not causal else T * (T + 1)) * cd


def plan_flops(layer: BaseConv, prepared: BaseConv) -> tuple[int, dict]:
    """Useful FLOPs per sample of the planned direct forward of ``layer`` (``layers.LivePlan``:
    the live inner channels only, see the module docstring), and the layer's channel classes."""
    T, C = layer.shape
    p = prepared.__dict__["_plan"]
    f = p.flops()
    biases = (f["biases"] - (p.bo is not None)) * T * f["live"] + (T * C if p.bo is not None else 0)
    total = f["projections"] + _conv_flops(T, layer.causal, p.conv) + f["product"] + biases \
        + (T * C if layer.residual else 0)
    return total, {"live": f["live"], "scaling": f["lag0"], "sum": f["uniform"], "dense": f["general"],
                   "zero": C - f["lag0"] - f["uniform"] - f["general"], "bias_matrices_added": f["biases"]}


class AllChannels:
    """The planned direct forward before ``LivePlan`` (the previous ``BaseConv.prepare``): every
    inner channel formed, the three projections dense ``(B*T, C) x (C, C)`` GEMMs, the convolution
    planned per channel class (``ops.ConvPlan`` on all channels), zero bias matrices skipped."""

    def __init__(self, L: BaseConv):
        self.L, self.plan = L, ops.ConvPlan(L.h, causal=L.causal, same=L.same)
        self.zero = {k: not bool((getattr(L, k) != 0).any()) for k in ("b_in", "b_conv", "b_gate", "b_out")}

    def forward(self, u):
        L, zb = self.L, self.zero
        v = u @ L.W_in
        v = v if zb["b_in"] else v + L.b_in
        z = self.plan(v)
        z = z if zb["b_conv"] else z + L.b_conv
        g = u @ L.W_gate
        g = g if zb["b_gate"] else g + L.b_gate
        y = (g * z) @ L.W_out
        y = y if zb["b_out"] else y + L.b_out
        return u + y if L.residual else y

    def flops(self) -> int:
        T, C = self.L.shape
        biases = sum(1 for v in self.zero.values() if not v)
        return (3 * 2 * T * C * C + _conv_flops(T, self.L.causal, self.plan) + T * C + biases * T * C
                + (T * C if self.L.residual else 0))


def fft_path_flops(layer: BaseConv, batch: int, filter_per_call: bool) -> float:
    """Useful FLOPs per sample of an FFT-convolution forward that adds every bias matrix."""
    T, C = layer.shape
    n = 2 * T if layer.causal else T
    conv = C * (2 * rfft_flops(n) + 6 * (n // 2 + 1))
    if filter_per_call:
        conv += C * rfft_flops(n) / batch
    return 3 * 2 * T * C * C + 4 * T * C + T * C + conv + (T * C if layer.residual else 0)


def gemm_same_flops(layer: BaseConv) -> int:
    T, C = layer.shape
    return 3 * 2 * T * C * C + 2 * T * T * C


def nonzero_weight_flops(layer: BaseConv) -> int:
    """2 x the structurally nonzero weights x T: what the three projections would cost if the
    zero weights were skipped (a note, not a column: every path here runs them dense)."""
    T, _ = layer.shape
    return 2 * T * sum(int((np.asarray(getattr(layer, w), dtype=object) != 0).sum())
                       for w in ("W_in", "W_gate", "W_out"))


# ------------------------------------------------------------------ timing

def _sync(device):
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def time_interleaved(fns: dict, device, repeats: int, warm=None) -> dict:
    """Wall and CPU seconds of each function in every round, the functions run in turns.

    Round r runs every function once, starting at position r (rotating), so
    that a transient stall or a load change of the machine hits every
    implementation alike and no implementation always follows the same one.
    One untimed warm-up call each (allocations, kernel selection) of the
    functions named in ``warm`` (default: all; the caller has run the others).
    """
    for k, f in fns.items():
        if warm is None or k in warm:
            f()
    _sync(device)
    names = list(fns)
    out = {k: {"wall": [], "cpu": []} for k in names}
    for r in range(repeats):
        for i in range(len(names)):
            k = names[(r + i) % len(names)]
            c0, t0 = time.process_time(), time.perf_counter()
            fns[k]()
            _sync(device)
            out[k]["wall"].append(time.perf_counter() - t0)
            out[k]["cpu"].append(time.process_time() - c0)
    return out


def breakdown(layer: BaseConv, u, device, repeats: int) -> dict:
    """Median wall time of each piece of one ``BaseConv.forward`` (the toolkit's ops path)."""
    L = layer
    v = ops.add(ops.mm(u, L.W_in), L.b_in)
    plan = ops.ConvPlan(L.h, causal=L.causal)
    z = ops.conv(v, L.h, causal=L.causal)
    g = ops.add(ops.mm(u, L.W_gate), L.b_gate)
    pieces = {
        "u W_in": lambda: ops.mm(u, L.W_in),
        "conv (planned: ops.ConvPlan)": lambda: plan(v),
        "conv (unplanned (T,T,C) Toeplitz einsum)": lambda: ops.conv(v, L.h, causal=L.causal),
        "conv (fft)": lambda: ops.conv(v, L.h, causal=L.causal, method="fft"),
        "+ bias matrix": lambda: ops.add(z, L.b_conv),
        "u W_gate": lambda: ops.mm(u, L.W_gate),
        "gate * conv": lambda: ops.hadamard(g, z),
        "(.) W_out": lambda: ops.mm(ops.hadamard(g, z), L.W_out),
    }
    tm = time_interleaved(pieces, device, repeats)
    return {k: float(np.median(v["wall"])) for k, v in tm.items()}


def set_numpy_blas_threads(n: int) -> str:
    """Set the thread count of the BLAS numpy loaded (OpenBLAS, found in this process's
    memory map; no extra dependency).  Returns what was done, for the header line."""
    import ctypes  # noqa: PLC0415

    try:
        with open("/proc/self/maps") as fh:
            libs = sorted({ln.split()[-1] for ln in fh if "openblas" in ln.lower() and ln.split()[-1].startswith("/")})
    except OSError:
        libs = []
    for path in libs:
        lib = ctypes.CDLL(path)
        for sym in ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                    "openblas_set_num_threads64_", "openblas_set_num_threads"):
            if hasattr(lib, sym):
                getattr(lib, sym)(ctypes.c_int(n))
                return f"numpy OpenBLAS {n} thread{'s' if n > 1 else ''}"
    return "numpy BLAS threads not set (no OpenBLAS found)"


def _med(xs):
    return float(np.median(xs))


# ------------------------------------------------------------------ one configuration

def run_config(con, stack, dtype: str, B: int, a) -> dict:
    be = Backend("torch", dtype, a.device)
    dt = getattr(torch, dtype)
    T, C = con.layout.shape
    cast = [be.cast_layer(L) for L in stack]
    allch = [AllChannels(L) for L in cast]
    fair = [TorchBaseConv(L, dt, a.device) for L in stack]
    percall = [TorchBaseConv(L, dt, a.device, filter_fft_per_call=True) for L in stack]
    csr = [SparseTorchBaseConv(L, dt, a.device) for L in stack] if dtype in ("float32", "float64") else None
    nominal = sum(L.flops() for L in stack)
    useful = {
        CONSTR: sum(plan_flops(L, P)[0] for L, P in zip(stack, cast)),
        CONSTR_ALL: sum(A.flops() for A in allch),
        CONSTR_FFT: sum(fft_path_flops(L, B, True) for L in stack),
        BASE: sum(fft_path_flops(L, B, False) for L in stack),
        BASE_PERCALL: sum(fft_path_flops(L, B, True) for L in stack),
        BASE_SPARSE: sum(fft_path_flops(L, B, False) - 6 * L.shape[0] * L.shape[1] ** 2 + nonzero_weight_flops(L)
                         for L in stack),
        GEMM_SAME: sum(gemm_same_flops(L) for L in stack),
    }
    P = sample_ls(B, a.n, a.d, seed=0)
    q = np.random.default_rng(1).standard_normal((B, a.d))
    S0 = be.asarray(con.input_state({"A": P.A, "b": P.b, "x": P.x0, "q": q}))

    def run_layers(layers, **kw):
        def f():
            S = S0
            for L in layers:
                S = L.forward(S, **kw)
            return S
        return f

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

    N = a.gemm_n
    fns = {}
    on_cpu = not a.device.startswith("cuda")
    if on_cpu and dtype in ("float32", "float64"):
        rng = np.random.default_rng(2)
        Xn, Yn = rng.standard_normal((N, N)).astype(dtype), rng.standard_normal((N, N)).astype(dtype)
        fns[PEAK_NP] = lambda: Xn @ Yn
    Xt, Yt = torch.randn(N, N, dtype=dt, device=a.device), torch.randn(N, N, dtype=dt, device=a.device)
    fns[PEAK_TORCH] = lambda: Xt @ Yt
    fns.update({CONSTR: run_layers(cast), CONSTR_ALL: run_layers(allch), CONSTR_FFT: run_layers(cast, conv_method="fft"),
                BASE: run_layers(fair), BASE_PERCALL: run_layers(percall), GEMM_SAME: run_gemm})
    if csr is not None:
        fns[BASE_SPARSE] = run_layers(csr)
    with torch.inference_mode():
        ref = fns[CONSTR]()
        scale = float(ref.abs().max())
        diffs = {k: float((fns[k]() - ref).abs().max()) for k in (CONSTR_ALL, CONSTR_FFT, BASE, BASE_PERCALL, BASE_SPARSE)
                 if k in fns}
        # the output comparison above was the warm-up of the forwards
        tm = time_interleaved(fns, a.device, a.repeats, warm=(PEAK_NP, PEAK_TORCH, GEMM_SAME))
        parts = None
        if a.breakdown_layer is not None and B == max(a.batch_list):
            li = min(a.breakdown_layer, len(cast) - 1)
            parts = {"layer": li, "classes": plan_flops(stack[li], cast[li])[1],
                     "ms": {k: 1e3 * v for k, v in breakdown(cast[li], S0, a.device, a.repeats).items()}}
    peak_rounds = np.max([[2 * N ** 3 / t / 1e9 for t in tm[k]["wall"]] for k in (PEAK_NP, PEAK_TORCH) if k in tm],
                         axis=0)
    base_w = np.array(tm[BASE]["wall"])
    row = {"dtype": dtype, "batch": B, "layers": len(stack), "nominal_flops_per_sample": nominal,
           "max_abs_diff_vs_construction": diffs, "output_max_abs": scale, "gemm_n": N,
           "gemm_peak_gflops_median": _med(peak_rounds),
           "gemm_peak_gflops_by_library": {k: _med([2 * N ** 3 / t / 1e9 for t in tm[k]["wall"]])
                                           for k in (PEAK_NP, PEAK_TORCH) if k in tm},
           "impl": {}}
    for name in (CONSTR, CONSTR_ALL, CONSTR_FFT, BASE, BASE_PERCALL, BASE_SPARSE, GEMM_SAME):
        if name not in tm:  # the CSR baseline: float32 / float64 only
            continue
        w, c = np.array(tm[name]["wall"]), np.array(tm[name]["cpu"])
        u = useful[name]
        row["impl"][name] = {
            "useful_flops_per_sample": u,
            "wall_median_s": _med(w), "wall_min_s": float(w.min()), "cpu_median_s": _med(c),
            "wall_per_sample_s": _med(w) / B, "cpu_per_sample_s": _med(c) / B,
            "cpu_over_wall": _med(c / w),
            "nominal_gflops": nominal * B / _med(w) / 1e9, "useful_gflops": u * B / _med(w) / 1e9,
            "fraction_of_peak_useful": _med(u * B / w / 1e9 / peak_rounds),
            "fraction_of_peak_nominal": _med(nominal * B / w / 1e9 / peak_rounds),
            "speedup_vs_baseline": _med(base_w / w),
            "wall_rounds_s": w.tolist(), "cpu_rounds_s": c.tolist(),
        }
    if parts is not None:
        row["breakdown"] = parts
    del U, V, K, S0
    return row


# ------------------------------------------------------------------ output

def print_config(row: dict, first: bool) -> None:
    if first:
        print(f"{'dtype':<8} {'batch':>5} {'implementation':<44} {'wall/sample':>11} {'CPU/sample':>10} "
              f"{'CPU/wall':>8} {'useful/nom':>10} {'nom GF/s':>8} {'useful GF/s':>11} {'of peak':>7} "
              f"{'vs baseline':>11}")
    for name, r in row["impl"].items():
        print(f"{row['dtype']:<8} {row['batch']:>5} {name:<44} {1e6 * r['wall_per_sample_s']:>9.2f}us "
              f"{1e6 * r['cpu_per_sample_s']:>8.2f}us {r['cpu_over_wall']:>8.2f} "
              f"{r['useful_flops_per_sample'] / row['nominal_flops_per_sample']:>10.3f} {r['nominal_gflops']:>8.2f} "
              f"{r['useful_gflops']:>11.2f} {r['fraction_of_peak_useful']:>7.3f} {r['speedup_vs_baseline']:>10.2f}x")
    lib = ", ".join(f"{k.split('(')[1].rstrip(')')} {v:.1f}" for k, v in row["gemm_peak_gflops_by_library"].items())
    print(f"{'':<14} GEMM peak {row['gemm_n']}^3 {row['dtype']}, interleaved: median of the per-round max "
          f"{row['gemm_peak_gflops_median']:.1f} GFLOP/s ({lib}); max |difference| to the construction output "
          f"(max |output| {row['output_max_abs']:.2g}): "
          + ", ".join(f"{SHORT[k]} {v:.1e}" for k, v in row["max_abs_diff_vs_construction"].items()))
    mine, before = row["impl"][CONSTR], row["impl"][CONSTR_ALL]
    print(f"{'':<14} live-channel plan against all channels (the plan before it): "
          f"{before['cpu_per_sample_s'] / mine['cpu_per_sample_s']:.2f}x less CPU per sample, "
          f"{before['wall_per_sample_s'] / mine['wall_per_sample_s']:.2f}x less wall")
    if "breakdown" in row:
        b = row["breakdown"]
        cl = ", ".join(f"{k} {v}" for k, v in b["classes"].items())
        print(f"{'':<14} one layer (stack layer {b['layer']}: {cl}), batch {row['batch']}, median ms: "
              + ", ".join(f"{k} {v:.2f}" for k, v in b["ms"].items()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="256,1024,4096")
    ap.add_argument("--dtypes", default="float32,float64", help=f"comma list of {', '.join(DTYPES)}")
    ap.add_argument("--dtype", help="one dtype (same as --dtypes DTYPE)")
    ap.add_argument("--layers", type=int, default=31, help="depth 1 + 3k of the GD stack (default 31)")
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--d", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=4, help="interleaved rounds (median reported; default 4)")
    ap.add_argument("--gemm-n", type=int, default=1024, help="size N of the N^3 GEMM peak (default 1024)")
    ap.add_argument("--threads", type=int, default=1,
                    help="CPU threads of torch and of numpy's BLAS (default 1; 0: the libraries' defaults)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: batches 16,64, 4 layers, 2 rounds, GEMM 256 (a few seconds)")
    ap.add_argument("--json", help="write the results as JSON")
    a = ap.parse_args(argv)
    if a.quick:
        a.batches, a.layers, a.repeats, a.gemm_n = "16,64", 4, 2, 256
    try:
        a.batch_list = [int(t) for t in a.batches.split(",") if t.strip()]
        if not a.batch_list or min(a.batch_list) < 1:
            raise ValueError
    except ValueError:
        print(f"error: --batches must be a comma list of positive integers, got {a.batches!r}", file=sys.stderr)
        return 2
    dtypes = [t.strip() for t in (a.dtype if a.dtype is not None else a.dtypes).split(",") if t.strip()]
    bad = [t for t in dtypes if t not in DTYPES]
    if not dtypes or bad:
        print(f"error: unknown dtype {bad[0] if bad else ''!r}; choose from {', '.join(DTYPES)}", file=sys.stderr)
        return 2
    for flag, v, lo in (("--repeats", a.repeats, 1), ("--gemm-n", a.gemm_n, 1), ("--threads", a.threads, 0)):
        if v < lo:
            print(f"error: {flag} must be >= {lo}, got {v}", file=sys.stderr)
            return 2
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("error: --device cuda requested but torch sees no CUDA GPU", file=sys.stderr)
        return 2
    if a.device != "cpu" and not a.device.startswith("cuda"):
        print(f"error: --device must be cpu or cuda[:i], got {a.device!r}", file=sys.stderr)
        return 2
    try:
        con = gd_baseconv(a.n, a.d)
        k = con.steps_for_depth(a.layers)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    a.breakdown_layer = 2 if k >= 1 else None
    blas = "numpy BLAS threads: library default"
    if a.threads and not a.device.startswith("cuda"):
        torch.set_num_threads(a.threads)
        blas = set_numpy_blas_threads(a.threads)
    stack = con.layers(k)
    T, C = con.layout.shape
    dev_name = (torch.cuda.get_device_name() if a.device.startswith("cuda")
                else f"CPU, {torch.get_num_threads()} torch threads, {blas}, {os.cpu_count()} CPUs")
    load0 = os.getloadavg()
    print(f"{con.name}: {len(stack)} layers (1 + 3 x {k}), state T={T} x C={C}, on {a.device} ({dev_name}); "
          f"torch {torch.__version__}, numpy {np.__version__}; load average {load0[0]:.2f}")
    classes = {}
    be = Backend("torch", "float64", a.device)
    for L in stack:
        cl = plan_flops(L, be.cast_layer(L))[1]
        key = tuple(cl.items())
        classes[key] = classes.get(key, 0) + 1
    print("per sample: nominal FLOPs (BaseConv.flops(), dense: 6TC^2 + 2T^2C + 6TC per layer) "
          f"{sum(L.flops() for L in stack)}; projections with zero weights skipped would be "
          f"{sum(nonzero_weight_flops(L) for L in stack)} of the {sum(6 * T * C * C for _ in stack)} dense GEMM FLOPs")
    print("ConvPlan channel classes: " + "; ".join(f"{n} layers {dict(key)}" for key, n in classes.items()))
    print(f"times: median of {a.repeats} interleaved rounds; 'of peak': useful GFLOP/s over the same round's "
          f"GEMM peak; 'vs baseline': per-round speedup over '{BASE}'")
    results = []
    t_start, c_start = time.perf_counter(), time.process_time()
    for dtype in dtypes:
        for B in a.batch_list:
            row = run_config(con, stack, dtype, B, a)
            print_config(row, first=not results)
            sys.stdout.flush()
            results.append(row)
    load1 = os.getloadavg()
    print(f"total {time.perf_counter() - t_start:.1f} s wall, {time.process_time() - c_start:.1f} s CPU; "
          f"load average {load1[0]:.2f} at the end")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"device": a.device, "device_name": dev_name, "torch": torch.__version__, "numpy": np.__version__,
                       "construction": con.name, "layers": len(stack), "T": T, "C": C, "dtypes": dtypes,
                       "batches": a.batch_list, "repeats": a.repeats, "gemm_n": a.gemm_n,
                       "load_average": [load0[0], load1[0]], "baseline": BASE, "results": results}, fh, indent=1)
        print(f"written {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
