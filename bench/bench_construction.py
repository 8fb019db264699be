"""Benchmark: the GD constructions' float run against equal-work baselines and plain GD, FLOPs counted.

The job is ``k`` steps of gradient descent ``x <- x - eta A^T (A x - b)`` on a batch of N x D
least-squares problems (seed 000 eq. (3); ``sample_ls``).  For ``gd-baseconv`` (seed 000 App. D.3.1,
``constructions.gd_baseconv.gd_baseconv``: T=21 tokens x C=27 channels at 20x5) and ``gd-lsa``
(seed 001 eq. (8), (39), ``constructions.gd_attention.gd_lsa``: 6 x 48) at the same depth (31
layers by default: 10 steps of gd-baseconv, 30 of gd-lsa), in torch on the CPU, it times, interleaved
round by round, in one process:

* ``construction, the gd command's run`` (**the real entry point**): ``numerics.runner.stream_construction``
  as ``gd`` / ``gd_accuracy`` call it -- the input state embedded and moved to torch, each distinct
  layer cast and planned (``Backend.cast_layer``), the run loop ``Construction.run`` (planned
  BaseConv layers channel-major, residual LSA layers in place on the run's own state,
  ``constructions.plans.run_checked``; the first non-finite layer watched on the device), ``x`` read
  out to numpy after every GD step;
* ``construction, the gd command's run, numpy backend``: the same entry point with ``--backend numpy``
  (the same channel-major plans on numpy arrays; CPU only);
* ``construction, per-layer forward``: ``Layer.forward`` one layer after another (``LivePlan`` /
  the sparse heads) on layers cast once, no checks, ``x`` read out at the end: the layers alone;
* ``same live channels, plain torch`` (**equal work**): the layer written in plain torch on exactly
  the channels the construction forms -- dense ``(B*T, r) x (r, K)`` products on the live blocks
  (``u[..., R] @ W[R, K]``), the convolution of the live channels (``ops.ConvPlan``), the carried
  and copied channels as one dense ``C x C`` product of the input, biases added; for gd-lsa the
  same heads on their nonzero rows and columns as matrix products and ``bmm``s;
* ``dense layer, plain torch (all channels)``: the layer as an ML user writes it without knowing its
  zeros -- BaseConv with ``nn.Linear`` projections and an FFT long convolution (zoology / H3 style,
  filter FFT taken once), or Hagiwara's LSA with every head's full ``n x n`` weights;
* ``plain GD, torch bmm`` (**the anchor**, what a user would run instead): ``k`` steps of
  ``x - eta A^T (A x - b)`` with ``torch.bmm``;
* ``plain GD, A^T A precomputed``: ``G = A^T A`` and ``c = A^T b`` (timed, once per run), then ``k``
  steps of ``x - eta (G x - c)``;
* the machine's matmul peak: one numpy and one torch ``N x N @ N x N`` (``--gemm-n``) in the dtype,
  **inside every round**, so each round's rates are compared with that round's peak.

Every round runs every item once from a rotating start; the report is the median over rounds and
every ratio the median of the per-round ratios (a load change between rounds cancels).  Time per
sample: CPU (``time.process_time()``, user + sys of this process) and wall.  Threads: one by
default (``--threads``; on a shared 2-core machine two threads per library wait at barriers).

FLOPs per sample (a multiply or an add is one):

* **algorithm** (useful): ``k (4 N D + N + 2 D)`` -- per step ``A x`` and ``A^T r`` (2 N D each), the
  residual (N), the scaled update (2 D); the same for every implementation of the job;
* **performed** by each implementation: the construction's planned layers ``LivePlan.flops()``
  (``plan_flops``: projections 2 per entry of a restricted block and none for a selection, the
  convolution per channel class, the products and the nonzero bias matrices) or its heads'
  (``lsa_head_flops``); the equal-work baseline's dense live blocks; the dense layer's
  ``6 T C^2 + FFT + 5 T C`` / ``sum over heads 3 * 2 m n^2 + 4 m n^2``; plain GD the algorithm's
  count, with ``A^T A`` precomputed ``2 N D^2 + 2 N D + k (2 D^2 + 3 D)``;
* both fractions of the round's matmul peak (the larger of numpy's and torch's): performed
  GFLOP/s / peak and algorithm GFLOP/s / peak.

Errors: the iterate each implementation reads out after ``k`` steps against exact GD on the same
(rounded) inputs (``numerics.reference.gd_reference``, 50 digits), max abs over the first
``--error-problems`` problems.

    python bench/bench_construction.py                       # batches 256,4096 x float32,float64
    python bench/bench_construction.py --quick               # smoke run, a few seconds
    python bench/bench_construction.py --batches 4096 --json out/b.json --md out/b.md
"""
from __future__ import annotations

import json
import math
import os
import sys
import time

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from constructions import ops  # noqa: E402
from constructions.gd_attention import gd_lsa  # noqa: E402
from constructions.gd_baseconv import gd_baseconv  # noqa: E402
from constructions.layers import BaseConv  # noqa: E402
from constructions.plans import LivePlan  # noqa: E402
from numerics.backends import Backend  # noqa: E402
from numerics.runner import stream_construction  # noqa: E402
from numerics.problems import sample_ls  # noqa: E402
from numerics.reference import gd_reference  # noqa: E402
from polyverify.plumbing.cli import Parser, UsageError, atomic_write_text, output_file, run_main  # noqa: E402

DTYPES = ("float32", "float64")
ARCHS = {"baseconv": gd_baseconv, "lsa": gd_lsa}
CHANNEL = "construction, the gd command's run"
NUMPY = "construction, the gd command's run, numpy backend"
FORWARD = "construction, per-layer forward"
LIVE = "same live channels, plain torch"
DENSE = "dense layer, plain torch (all channels)"
GD = "plain GD, torch bmm"
GRAM = "plain GD, A^T A precomputed"
PEAK_NP = "matmul peak (numpy)"
PEAK_TORCH = "matmul peak (torch)"
IMPLS = (CHANNEL, NUMPY, FORWARD, LIVE, DENSE, GD, GRAM)


# ------------------------------------------------------------------ baselines

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





def _dense(A) -> np.ndarray:
    """A weight (exact object array or SparseMatrix) as float64 numpy."""
    A = A.toarray() if hasattr(A, "toarray") else A
    return np.asarray(np.asarray(A, dtype=object).astype(float), dtype=np.float64)


class LiveTorchBaseConv:
    """Equal work, plain torch: one BaseConv layer on exactly the inner channels the construction
    forms (``LivePlan.K``), written as an ML user writes it once told which channels are live --
    dense products on the live blocks (``u[..., R] @ W[R, K]``, ``index_select`` for ``u[..., R]``),
    the live channels' convolution by ``ops.ConvPlan``, the carried and copied channels as one dense
    ``C x C`` product of the input (``W_keep``), every bias matrix of the live channels added."""

    def __init__(self, L: BaseConv, p: LivePlan, dtype, device):
        T, C = L.shape
        self.T, self.C, self.residual = T, C, L.residual
        f = lambda a: torch.as_tensor(a, dtype=dtype, device=device)  # noqa: E731
        Win, Wg, Wo = _dense(L.W_in), _dense(L.W_gate), _dense(L.W_out)
        keep = np.zeros((C, C))
        for k in p.copied.tolist():  # a copied channel is u[:, r] (W_in column e_r): its W_out row reads u[:, r]
            keep[int(np.flatnonzero(Win[:, k])[0])] += Wo[k]
        self.keep = f(keep)
        K, Rg, Ri = p.K, p.Rg, p.Ri
        self.k = len(K)
        ix = lambda a: torch.as_tensor(np.asarray(a, dtype=np.int64), device=device)  # noqa: E731
        self.Rg, self.Ri = ix(Rg), ix(Ri)
        self.Wg, self.Wi, self.Wo = f(Wg[np.ix_(Rg, K)]), f(Win[np.ix_(Ri, K)]), f(Wo[K])
        bias = lambda name: f(_dense(getattr(L, name))[:, K])  # noqa: E731
        self.bg, self.bi, self.bc = bias("b_gate"), bias("b_in"), bias("b_conv")
        self.bo = f(_dense(L.b_out))
        self.conv = ops.ConvPlan(f(_dense(L.h)[:, K]), causal=L.causal, same=L.same)
        self._flops = (2 * T * C * C + T * C + 2 * T * self.k * (len(Rg) + len(Ri) + C)
                       + _conv_flops(T, L.causal, self.conv) + 4 * T * self.k + (T * C if L.residual else 0))

    @staticmethod
    def _cols(u, idx):
        return u.reshape(-1, u.shape[-1]).index_select(1, idx).reshape(tuple(u.shape[:-1]) + (len(idx),))

    def forward(self, u):
        y = u @ self.keep + self.bo
        if self.k:
            g = (self._cols(u, self.Rg) @ self.Wg if len(self.Rg) else 0) + self.bg
            v = (self._cols(u, self.Ri) @ self.Wi if len(self.Ri) else 0) + self.bi
            y = y + (g * (self.conv(v) + self.bc)) @ self.Wo
        return u + y if self.residual else y

    def flops(self) -> int:
        return self._flops


def lsa_heads(P) -> list:
    """The prepared LSA layer's heads (``sparse_head`` plans) of its one stage."""
    plan = P.__dict__["_plan"]
    return [hd for stage in plan for hd in stage if hd["vcols"] and hd["q"][1].shape[-1]]


class LiveTorchLSA:
    """Equal work, plain torch: one LSA layer (seed 001 eq. (8), (39)) on the rows and columns its
    heads use (``sparse_head``), each side a matrix product, ``K^T V`` and ``Q (K^T V)`` as batched
    products, the heads added into their value columns, then the skip."""

    def __init__(self, P, m: int, n: int, device):
        ix = lambda a: torch.as_tensor(np.asarray(a, dtype=np.int64), device=device)  # noqa: E731
        self.heads = [(ix(hd["q"][0]), hd["q"][1], ix(hd["k"][0]), hd["k"][1], ix(hd["v"][0]), hd["v"][1],
                       ix(hd["vcols"])) for hd in lsa_heads(P)]
        self.residual = P.residual
        fl = 0
        for hd in lsa_heads(P):
            (rq, Wq, _), (rk, Wk, _), (rv, Wv, _) = hd["q"], hd["k"], hd["v"]
            cq, cv = Wq.shape[1], Wv.shape[1]
            fl += 2 * m * (len(rq) * cq + len(rk) * Wk.shape[1] + len(rv) * cv) + 4 * m * cq * cv + m * cv
        self._flops = fl + (m * n if P.residual else 0)

    @staticmethod
    def _cols(u, idx):
        return u.reshape(-1, u.shape[-1]).index_select(1, idx).reshape(tuple(u.shape[:-1]) + (len(idx),))

    def forward(self, H):
        acc = torch.zeros_like(H)
        for rq, Wq, rk, Wk, rv, Wv, cols in self.heads:
            Q, K, V = self._cols(H, rq) @ Wq, self._cols(H, rk) @ Wk, self._cols(H, rv) @ Wv
            term = Q @ (K.transpose(-1, -2) @ V)
            acc.view(-1, acc.shape[-1]).index_add_(1, cols, term.reshape(-1, term.shape[-1]))
        return H + acc if self.residual else acc

    def flops(self) -> int:
        return self._flops


class DenseTorchLSA:
    """The LSA layer as written without knowing its zeros: every head's full ``n x n`` weights,
    ``sum_k (H W3)(H W1)^T (H W2)`` (seed 001 eq. (39)), then the skip."""

    def __init__(self, L, dtype, device):
        f = lambda a: torch.as_tensor(_dense(a), dtype=dtype, device=device)  # noqa: E731
        self.heads = [(f(h.W1), f(h.W2), f(h.W3)) for h in L.heads]
        self.residual = L.residual
        m = None
        self.n = L.heads[0].W1.shape[0] if L.heads else 0
        del m

    def forward(self, H):
        out = None
        for W1, W2, W3 in self.heads:
            t = (H @ W3) @ ((H @ W1).transpose(-1, -2) @ (H @ W2))
            out = t if out is None else out + t
        return H + out if self.residual else out

    def flops(self, m: int) -> int:
        n = self.n
        return len(self.heads) * (6 * m * n * n + 4 * m * n * n + m * n) + (m * n if self.residual else 0)


def lsa_plan_flops(P, m: int) -> int:
    """FLOPs per sample the construction's prepared LSA layer performs (``plans._sparse_heads_torch``):
    per head, a side whose weight is the identity or its negative reads its columns as they are (0),
    a diagonal one 1 per entry, any other ``2 m r c``; ``K^T V`` and ``Q (K^T V)`` ``2 m r c_v`` each;
    the head added into the stage's value columns; the residual adds those columns into H."""
    total, union = 0, set()
    for hd in lsa_heads(P):
        for key in ("q", "k", "v"):
            rows, W, _ = hd[key]
            Wn = W.detach().cpu().double().numpy()
            if Wn.shape[0] == Wn.shape[1] and np.array_equal(Wn, np.diag(np.diag(Wn))):
                d = np.diag(Wn)
                total += 0 if (np.abs(d) == 1).all() and (d == d[0]).all() else m * len(rows)
            else:
                total += 2 * m * Wn.shape[0] * Wn.shape[1]
        r, cv = hd["q"][1].shape[1], hd["v"][1].shape[1]
        total += 4 * m * r * cv + m * cv
        union |= set(hd["vcols"])
    return total + (m * len(union) if P.residual else 0)


def gd_flops(n: int, d: int, k: int) -> int:
    """The algorithm: k steps of x - eta A^T (A x - b): A x and A^T r (2 N D each), r (N), update (2 D)."""
    return k * (4 * n * d + n + 2 * d)


def gram_flops(n: int, d: int, k: int) -> int:
    """A^T A and A^T b once (2 N D^2 + 2 N D), then k steps of x - eta (G x - c) (2 D^2 + 3 D)."""
    return 2 * n * d * d + 2 * n * d + k * (2 * d * d + 3 * d)



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



def fft_path_flops(layer: BaseConv, batch: int, filter_per_call: bool) -> float:
    """Useful FLOPs per sample of an FFT-convolution forward that adds every bias matrix."""
    T, C = layer.shape
    n = 2 * T if layer.causal else T
    conv = C * (2 * rfft_flops(n) + 6 * (n // 2 + 1))
    if filter_per_call:
        conv += C * rfft_flops(n) / batch
    return 3 * 2 * T * C * C + 4 * T * C + T * C + conv + (T * C if layer.residual else 0)




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

def eta_of(con) -> float:
    p = con.params
    return float(p["eta"]) if "eta" in p else float(p["sqrt_eta"]) ** 2


def run_config(arch: str, con, k: int, dtype: str, B: int, a) -> dict:
    be = Backend("torch", dtype, a.device)
    dt = getattr(torch, dtype)
    n, d = con.variables["A"]
    stack = con.layers(k)
    cast = [be.cast_layer(L) for L in stack]
    shape = con.layout.shape
    P = sample_ls(B, n, d, seed=0)
    v = {"A": P.A, "b": P.b, "x": P.x0}
    if "q" in con.variables:
        v["q"] = np.random.default_rng(1).standard_normal((B, d))
    S0 = be.asarray(con.input_state(v))
    eta = eta_of(con)
    A = be.asarray(P.A)
    b = be.asarray(P.b)[..., None]
    x0 = be.asarray(P.x0)[..., None]
    At = A.transpose(-1, -2)

    def plain_gd():
        x = x0
        for _ in range(k):
            x = x - eta * torch.bmm(At, torch.bmm(A, x) - b)
        return x[..., 0]

    def gram_gd():
        G, c = torch.bmm(At, A), torch.bmm(At, b)
        x = x0
        for _ in range(k):
            x = x - eta * (torch.bmm(G, x) - c)
        return x[..., 0]

    def layers_of(objs):
        def f():
            S = S0
            for L in objs:
                S = L.forward(S)
            return S
        return f

    readout = lambda S: con.readout(S)["x"]  # noqa: E731
    fns, performed = {}, {}
    if arch == "baseconv":
        live = [LiveTorchBaseConv(L, C.__dict__["_plan"], dt, a.device) for L, C in zip(stack, cast)]
        dense = [TorchBaseConv(L, dt, a.device) for L in stack]
        performed[CHANNEL] = performed[FORWARD] = sum(plan_flops(L, C)[0] for L, C in zip(stack, cast))
        performed[LIVE] = sum(x.flops() for x in live)
        performed[DENSE] = sum(fft_path_flops(L, B, False) for L in stack)
    else:
        m, nn_ = shape
        live = [LiveTorchLSA(C, m, nn_, a.device) for C in cast]
        dense = [DenseTorchLSA(C, dt, a.device) for C in cast]
        performed[CHANNEL] = performed[FORWARD] = sum(lsa_plan_flops(C, m) for C in cast)
        performed[LIVE] = sum(x.flops() for x in live)
        performed[DENSE] = sum(x.flops(m) for x in dense)
    run_fwd, run_live, run_dense = layers_of(cast), layers_of(live), layers_of(dense)
    vr = {name: be.round_input(a) for name, a in v.items()}  # what the gd command runs on: rounded inputs

    def entry(backend, inputs, label):
        """The gd command's entry point (``stream_construction``) on ``backend``: the last iterate."""
        def run():
            last = []
            res = stream_construction(con, inputs, k, backend, lambda j, x: last.append(x) if j == k else None)
            if res.first_nonfinite_layer is not None:
                raise RuntimeError(f"{con.name} {label}: non-finite at layer {res.first_nonfinite_layer}")
            return torch.as_tensor(last[0])

        return run

    fns[CHANNEL] = entry(be, vr, dtype)
    if a.device == "cpu":  # the numpy backend through the same entry point
        be_np = Backend("numpy", dtype)
        fns[NUMPY] = entry(be_np, {name: be_np.round_input(x) for name, x in v.items()}, f"{dtype} numpy")
        performed[NUMPY] = performed[CHANNEL]
    fns[FORWARD] = lambda: readout(run_fwd())
    fns[LIVE] = lambda: readout(run_live())
    fns[DENSE] = lambda: readout(run_dense())
    fns[GD] = plain_gd
    fns[GRAM] = gram_gd
    performed[GD] = gd_flops(n, d, k)
    performed[GRAM] = gram_flops(n, d, k)
    algorithm = gd_flops(n, d, k)
    N = a.gemm_n
    rng = np.random.default_rng(2)
    Xn, Yn = rng.standard_normal((N, N)).astype(dtype), rng.standard_normal((N, N)).astype(dtype)
    Xt, Yt = torch.randn(N, N, dtype=dt, device=a.device), torch.randn(N, N, dtype=dt, device=a.device)
    peaks = {PEAK_NP: lambda: Xn @ Yn, PEAK_TORCH: lambda: Xt @ Yt}
    with torch.inference_mode():
        # errors: the iterate after k steps against exact GD on the same rounded inputs
        R = min(B, a.error_problems)
        ref = gd_reference(be.round_input(P.A[:R]), be.round_input(P.b[:R]), be.round_input(P.x0[:R]),
                           eta, k)
        ref = np.asarray(ref, dtype=np.float64)
        ref = ref[-1] if ref.ndim == 3 and ref.shape[0] == k + 1 else ref[:, -1]
        errors = {}
        for name, f in fns.items():  # the untimed first call of each: also its warm-up
            x = f()
            errors[name] = float(np.abs(be.to_numpy64(x[:R]) - ref).max())
        tm = time_interleaved({**peaks, **fns}, a.device, a.repeats, warm=tuple(peaks))
    peak_rounds = np.max([[2 * N ** 3 / t / 1e9 for t in tm[p]["wall"]] for p in peaks], axis=0)
    gd_c = np.array(tm[GD]["cpu"])
    gd_w = np.array(tm[GD]["wall"])
    row = {"arch": con.name, "dtype": dtype, "batch": B, "layers": len(stack), "steps": k, "state": list(shape),
           "algorithm_flops_per_sample": algorithm, "gemm_n": N,
           "matmul_peak_gflops_median": _med(peak_rounds),
           "matmul_peak_gflops_by_library": {p: _med([2 * N ** 3 / t / 1e9 for t in tm[p]["wall"]]) for p in peaks},
           "error_problems": R, "impl": {}}
    for name in IMPLS:
        if name not in tm:
            continue
        w, c = np.array(tm[name]["wall"]), np.array(tm[name]["cpu"])
        fl = performed[name]
        # a round whose CPU clock did not tick (a coarse clock, a tiny run) is left out of the CPU ratio
        ok = (c > 0) & (gd_c > 0)
        row["impl"][name] = {
            "performed_flops_per_sample": fl, "algorithm_flops_per_sample": algorithm,
            "wall_median_s": _med(w), "cpu_median_s": _med(c),
            "wall_per_sample_s": _med(w) / B, "cpu_per_sample_s": _med(c) / B, "cpu_over_wall": _med(c / w),
            "performed_gflops": fl * B / _med(w) / 1e9, "algorithm_gflops": algorithm * B / _med(w) / 1e9,
            "fraction_of_peak_performed": _med(fl * B / w / 1e9 / peak_rounds),
            "fraction_of_peak_algorithm": _med(algorithm * B / w / 1e9 / peak_rounds),
            "cpu_vs_plain_gd": _med(c[ok] / gd_c[ok]) if ok.any() else None,
            "wall_vs_plain_gd": _med(w / gd_w),
            "max_abs_error_vs_exact_gd": errors[name],
            "wall_rounds_s": w.tolist(), "cpu_rounds_s": c.tolist(),
        }
    return row


# ------------------------------------------------------------------ output

HEAD = (f"{'construction':<18} {'dtype':<7} {'batch':>5} {'implementation':<40} {'CPU/sample':>10} "
        f"{'wall/sample':>11} {'CPU vs GD':>9} {'FLOP/sample':>11} {'GF/s':>6} {'of peak':>8} "
        f"{'alg. of peak':>12} {'max|err|':>8}")


def _x(v):
    return "-" if v is None else f"{v:.2f}x"


def print_config(row: dict, first: bool) -> None:
    if first:
        print(HEAD)
    for name, r in row["impl"].items():
        print(f"{row['arch']:<18} {row['dtype']:<7} {row['batch']:>5} {name:<40} {1e6 * r['cpu_per_sample_s']:>8.2f}us "
              f"{1e6 * r['wall_per_sample_s']:>9.2f}us {_x(r['cpu_vs_plain_gd']):>9} "
              f"{r['performed_flops_per_sample']:>11.0f} {r['performed_gflops']:>6.2f} "
              f"{r['fraction_of_peak_performed']:>8.4f} {r['fraction_of_peak_algorithm']:>12.5f} "
              f"{r['max_abs_error_vs_exact_gd']:>8.1e}")
    lib = ", ".join(f"{k.split('(')[1].rstrip(')')} {v:.1f}" for k, v in row["matmul_peak_gflops_by_library"].items())
    print(f"{'':<18} matmul peak {row['gemm_n']}^3 {row['dtype']}: median of the per-round max "
          f"{row['matmul_peak_gflops_median']:.1f} GFLOP/s ({lib}); the algorithm: {row['steps']} GD steps = "
          f"{row['algorithm_flops_per_sample']} FLOP per sample; errors: max |x_k - exact GD| over "
          f"{row['error_problems']} problems")


def markdown(d: dict) -> str:
    lines = [f"Execution of the GD constructions (`python bench/bench_construction.py {d['argv']}`) on "
             f"{d['device_name']}; torch {d['torch']}, numpy {d['numpy']}; load average {d['load_average'][0]:.2f} "
             f"before, {d['load_average'][1]:.2f} after; median of {d['repeats']} interleaved rounds. "
             "'CPU vs GD': CPU per sample over plain torch GD's (bmm) in the same rounds (target: at most "
             f"{TARGET:g}x); FLOPs performed per sample and their fraction of the round's matmul peak; "
             "'alg. of peak': the algorithm's FLOPs (the GD steps) per second over the peak; the error: max "
             "|x_k - exact GD| (50 digits, same rounded inputs).\n",
             "| construction | dtype | batch | implementation | CPU/sample | wall/sample | CPU vs GD | FLOP/sample "
             "| of peak | alg. of peak | max abs error |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in d["results"]:
        for name, r in row["impl"].items():
            lines.append(f"| {row['arch']} ({row['layers']} layers, {row['steps']} steps) | {row['dtype']} | "
                         f"{row['batch']:,} | {name} | {1e6 * r['cpu_per_sample_s']:.2f} us | "
                         f"{1e6 * r['wall_per_sample_s']:.2f} us | {_x(r['cpu_vs_plain_gd'])} | "
                         f"{r['performed_flops_per_sample']:,.0f} | {r['fraction_of_peak_performed']:.4f} | "
                         f"{r['fraction_of_peak_algorithm']:.5f} | {r['max_abs_error_vs_exact_gd']:.1e} |")
    lines += ["", "Matmul peak per configuration (GFLOP/s, median of the per-round max of numpy and torch): "
              + "; ".join(f"{r['arch']} {r['dtype']} {r['batch']}: {r['matmul_peak_gflops_median']:.1f}"
                          for r in d["results"])]
    return "\n".join(lines) + "\n"


#: the issue's target (46 item 2): the construction's float run within this factor of plain GD's CPU per sample
TARGET = 6.0


def summary(results: list) -> list[str]:
    out = []
    for row in results:
        r = row["impl"][CHANNEL]
        v = r["cpu_vs_plain_gd"]
        verdict = "-" if v is None else ("met" if v <= TARGET else "not met")
        out.append(f"{row['arch']} {row['dtype']} batch {row['batch']}: {CHANNEL} {_x(v)} plain GD's CPU per "
                   f"sample (wall {_x(r['wall_vs_plain_gd'])}; the layers alone "
                   f"{_x(row['impl'][FORWARD]['cpu_vs_plain_gd'])}; GD with A^T A precomputed "
                   f"{_x(row['impl'][GRAM]['cpu_vs_plain_gd'])}), target {TARGET:g}x {verdict}; equal-work plain "
                   f"torch {_x(row['impl'][LIVE]['cpu_vs_plain_gd'])}"
                   + (f"; the numpy backend {_x(row['impl'][NUMPY]['cpu_vs_plain_gd'])}" if NUMPY in row["impl"] else ""))
    return out


def main(argv=None) -> int:
    """The command line; bad arguments are one line on stderr and exit 2 (``run_main``)."""
    return run_main(_run, argv)


def _run(argv) -> int:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--archs", default="baseconv,lsa", help=f"comma list of {', '.join(ARCHS)}")
    ap.add_argument("--batches", default="256,4096")
    ap.add_argument("--dtypes", default="float32,float64", help=f"comma list of {', '.join(DTYPES)}")
    ap.add_argument("--layers", type=int, default=31, help="depth of every construction's stack (default 31)")
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--d", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=5, help="interleaved rounds (median reported; default 5)")
    ap.add_argument("--gemm-n", type=int, default=1024, help="size N of the N^3 matmul peak (default 1024)")
    ap.add_argument("--threads", type=int, default=1,
                    help="CPU threads of torch and of numpy's BLAS (default 1; 0: the libraries' defaults)")
    ap.add_argument("--error-problems", type=int, default=64,
                    help="problems whose iterate is compared with exact GD (default 64)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: batches 16,64, 4 layers, 2 rounds, matmul 256 (a few seconds)")
    ap.add_argument("--json", help="write the results as JSON")
    ap.add_argument("--md", help="write the results as a markdown table")
    a = ap.parse_args(argv)
    if a.quick:
        a.batches, a.layers, a.repeats, a.gemm_n = "16,64", 4, 2, 256
    try:
        a.batch_list = [int(t) for t in a.batches.split(",") if t.strip()]
        if not a.batch_list or min(a.batch_list) < 1:
            raise ValueError
    except ValueError:
        raise UsageError(f"--batches must be a comma list of positive integers, got {a.batches!r}") from None
    dtypes = [t.strip() for t in a.dtypes.split(",") if t.strip()]
    bad = [t for t in dtypes if t not in DTYPES]
    if not dtypes or bad:
        raise UsageError(f"unknown dtype {bad[0] if bad else ''!r}; choose from {', '.join(DTYPES)}")
    archs = [t.strip() for t in a.archs.split(",") if t.strip()]
    bad = [t for t in archs if t not in ARCHS]
    if not archs or bad:
        raise UsageError(f"unknown construction {bad[0] if bad else ''!r} in --archs; choose from {', '.join(ARCHS)}")
    for flag, val, lo in (("--repeats", a.repeats, 1), ("--gemm-n", a.gemm_n, 1), ("--threads", a.threads, 0),
                          ("--error-problems", a.error_problems, 1), ("--layers", a.layers, 1)):
        if val < lo:
            raise UsageError(f"{flag} must be >= {lo}, got {val}")
    if a.device != "cpu" and not a.device.startswith("cuda"):
        raise UsageError(f"--device must be cpu or cuda[:i], got {a.device!r}")
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        raise UsageError("--device cuda requested but torch sees no CUDA GPU")
    js, md = output_file("--json", a.json), output_file("--md", a.md)
    cons = {}
    for arch in archs:
        try:
            con = ARCHS[arch](a.n, a.d)
            cons[arch] = (con, con.steps_for_depth(a.layers))
        except ValueError as e:
            raise UsageError(str(e)) from None
    blas = "numpy BLAS threads: library default"
    if a.threads and not a.device.startswith("cuda"):
        torch.set_num_threads(a.threads)
        blas = set_numpy_blas_threads(a.threads)
    dev_name = (torch.cuda.get_device_name() if a.device.startswith("cuda")
                else f"CPU, {torch.get_num_threads()} torch threads, {blas}, {os.cpu_count()} CPUs")
    load0 = os.getloadavg()
    print(f"on {a.device} ({dev_name}); torch {torch.__version__}, numpy {np.__version__}; load average {load0[0]:.2f}")
    for arch, (con, k) in cons.items():
        print(f"{con.name}: {con.depth(k)} layers = {k} GD steps, state {' x '.join(map(str, con.layout.shape))}, "
              f"N x D = {a.n}x{a.d}; the algorithm {gd_flops(a.n, a.d, k)} FLOP per sample")
    print(f"times: median of {a.repeats} interleaved rounds; 'CPU vs GD': per-round CPU over '{GD}'; "
          "'of peak': performed FLOPs per second over the round's matmul peak; 'alg. of peak': the algorithm's")
    results = []
    t_start, c_start = time.perf_counter(), time.process_time()
    for arch, (con, k) in cons.items():
        for dtype in dtypes:
            for B in a.batch_list:
                row = run_config(arch, con, k, dtype, B, a)
                print_config(row, first=not results)
                sys.stdout.flush()
                results.append(row)
    load1 = os.getloadavg()
    for line in summary(results):
        print(line)
    print(f"total {time.perf_counter() - t_start:.1f} s wall, {time.process_time() - c_start:.1f} s CPU; "
          f"load average {load1[0]:.2f} at the end")
    d = {"device": a.device, "device_name": dev_name, "torch": torch.__version__, "numpy": np.__version__,
         "argv": " ".join(argv if argv is not None else sys.argv[1:]), "archs": archs, "dtypes": dtypes,
         "batches": a.batch_list, "repeats": a.repeats, "gemm_n": a.gemm_n, "target_cpu_vs_plain_gd": TARGET,
         "load_average": [load0[0], load1[0]], "anchor": GD, "results": results}
    if js:
        atomic_write_text(js, json.dumps(d, indent=1), "--json")
        print(f"written {js}")
    if md:
        atomic_write_text(md, markdown(d), "--md")
        print(f"written {md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
