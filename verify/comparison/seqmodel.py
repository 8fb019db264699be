"""Comparing a trained ``numerics.training`` SequenceModel with a construction.

A SequenceModel trained on the explicit gradient task (seed 000 B.3.3) has its own learned
embedding (tokens -> width) and read-out (width -> D); its layers do not act on a construction's
layout, so the views that need the layout (layer-by-layer regions, invariants, the implicit w^l,
``--weights``) do not apply.  What does apply, against the construction's gradient
(``(x - step(x)) / (eta N)`` from the construction's own body: ``(1/N) A^T (A x - b)``, the task's
target, seed 000 eq. (46)):

* (1) predictions on fresh problems in and out of distribution (sigma, kappa, input scale);
* (2) sensitivities: the Jacobian d T / d x0 (learned: torch autograd through the model;
  constructed: the GD step is affine in x, so exact differences), cosine and L2;
* (3) the exact polynomial of each output component at the query token, learned (the float64
  weights and embedding as binary fractions, python-flint) against (1/N) A^T (A x0 - b),
  monomial by monomial (``poly.compare_polys``), for small N, D;
* (6) both iterated as solvers, x_{i+1} = x_i - eta T(A, b, x_i) (seed 000 Fig. 1b / Fig. 2),
  with the task's step eta.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass

import numpy as np

from constructions import ops, weights_io
from constructions.base import Construction, exact, run_layers

from .models import LS_NAMES, CompareError, Problems, run_float, to_float, to_torch, var_names


@dataclass
class SeqModel:
    """A SequenceModel export: exact layers, embedding (width x d_in), read-out (d_out x width)."""

    layers: list
    embed: np.ndarray
    readout: np.ndarray
    n: int
    d: int
    task: str
    eta: float
    path: str

    def tokens(self, A, b, x0) -> np.ndarray:
        """(B, N+1, 2D+2) tokens of the gradient task (numerics.training.tasks.LSTask.embed)."""
        B = A.shape[0]
        n, d = self.n, self.d
        u = np.zeros((B, n + 1, 2 * d + 2))
        u[:, :n, :d], u[:, :n, d] = A, b
        u[:, n, d + 1:2 * d + 1], u[:, n, 2 * d + 1] = x0, 1.0
        return u

    def predict(self, A, b, x0) -> np.ndarray:
        S = self.tokens(A, b, x0) @ self.embed.T
        S = run_float([to_float(L) for L in self.layers], S)
        return S[:, self.n] @ self.readout.T


def is_sequence_model_file(path) -> bool:
    try:
        from safetensors import safe_open

        with safe_open(str(path), framework="numpy") as f:
            meta = f.metadata() or {}
        c = json.loads(meta.get("construction", "{}"))
    except Exception:  # noqa: BLE001 - not one; the normal loader reports unreadable files
        return False
    return c.get("reference") == "trained (numerics.training)" and "model" in c


def load_sequence_model(path, *, kappa: float = 5.0) -> SeqModel:
    try:
        lw = weights_io.load(path, None, None, extra=("embed.weight", "readout.weight"))
    except weights_io.WeightFileError as e:
        raise CompareError(f"{e} (a SequenceModel export holds embed.weight and readout.weight)") from None
    c = lw.declared
    t = lw.extra
    m = c["model"]
    task = (c.get("notes") or {}).get("task", {}).get("name") or c.get("name", "").rsplit("-", 1)[-1]
    n, d_in, d_out = m["T"] - 1, m["d_in"], m["d_out"]
    if task != "gradient" or d_in != 2 * d_out + 2:
        raise CompareError(f"{path}: a SequenceModel for task {task!r} (d_in {d_in}, d_out {d_out}); only "
                           f"explicit-gradient models (tokens [a|b|x0|1], d_in = 2D + 2) compare with a GD construction")
    tinfo = (c.get("notes") or {}).get("task", {})
    eta = tinfo.get("eta") or 2.0 * n / (float(tinfo.get("kappa", kappa)) ** 2 + 1.0)
    return SeqModel(lw.layers, t["embed.weight"], t["readout.weight"], n, d_out, task, float(eta), str(path))


def construction_step_size(con: Construction):
    """The construction's GD step eta, exact (from ``eta`` or ``sqrt_eta``)."""
    p = getattr(con, "params", {}) or {}
    if "eta" in p:
        return p["eta"]
    if "sqrt_eta" in p:
        return p["sqrt_eta"] ** 2
    raise CompareError(f"{con.name}: no step size eta among its parameters {sorted(p)}")


def _exact_array(a: np.ndarray) -> np.ndarray:
    """Float64 entries as the exact binary fractions they are (``constructions.base.exact``)."""
    return np.vectorize(exact, otypes=[object])(a)


def constructed_gradient(con: Construction, A, b, x0) -> np.ndarray:
    """(x0 - x1) / (eta N) with x1 the construction's body applied once (float64): the task's
    gradient (1/N) A^T (A x0 - b) as the construction computes it."""
    from .analyses import input_state

    B, n, d = A.shape
    P = Problems(A, b, x0, np.zeros((B, d)), np.zeros((B, d)), "")
    S = run_float([to_float(L) for L in con.prologue + con.body], input_state(con, P))
    x1 = con.readout(S)["x"]
    return (x0 - x1) / (float(construction_step_size(con)) * n)


def exact_gradient(A, b, x) -> np.ndarray:
    r = np.einsum("bnd,bd->bn", A, x) - b
    return np.einsum("bnd,bn->bd", A, r) / A.shape[1]


def _f(x):
    x = float(x)
    return x if math.isfinite(x) else None


def functional(m: SeqModel, con, sets) -> dict:
    rows = []
    for P in sets:
        with np.errstate(all="ignore"):
            gl, gc = m.predict(P.A, P.b, P.x0), constructed_gradient(con, P.A, P.b, P.x0)
        ge = exact_gradient(P.A, P.b, P.x0)
        diff = gl - gc
        rms_c = float(np.sqrt(np.mean(gc ** 2)))
        rows.append({"set": P.label, "max_abs": _f(np.max(np.abs(diff))), "rms": _f(np.sqrt(np.mean(diff ** 2))),
                     "relative_rms": _f(np.sqrt(np.mean(diff ** 2)) / rms_c) if rms_c else None,
                     "mse_learned_vs_exact": _f(np.mean((gl - ge) ** 2)),
                     "mse_constructed_vs_exact": _f(np.mean((gc - ge) ** 2)),
                     "rms_constructed_prediction": rms_c})
    return {"predictions": rows, "per_layer": None,
            "per_layer_reason": "the learned model has its own embedding: no construction layout to compare states in"}


def sensitivities(m: SeqModel, con, sets) -> list[dict]:
    import torch

    Lt = [to_torch(L) for L in m.layers]
    E, R = torch.as_tensor(m.embed), torch.as_tensor(m.readout)
    rows = []
    for P in sets:
        B, n, d = P.A.shape
        x0 = torch.as_tensor(P.x0).requires_grad_(True)
        base = torch.as_tensor(m.tokens(P.A, P.b, np.zeros_like(P.x0)))
        sel = torch.zeros(d, 2 * d + 2, dtype=torch.float64)
        sel[:, d + 1:2 * d + 1] = torch.eye(d, dtype=torch.float64)
        u = base.clone()
        u[:, n, :] = u[:, n, :] + x0 @ sel
        S = run_layers(Lt, u @ E.T)
        out = S[:, n] @ R.T  # (B, d)
        Jl = torch.stack([torch.autograd.grad(out[:, j].sum(), x0, retain_graph=True)[0] for j in range(d)], 1)
        Jl = Jl.detach().numpy()  # (B, d_out, d_in)
        g0 = constructed_gradient(con, P.A, P.b, P.x0)
        Jc = np.stack([constructed_gradient(con, P.A, P.b, P.x0 + np.eye(d)[j]) - g0 for j in range(d)], -1)
        fl, fc = Jl.reshape(B, -1), Jc.reshape(B, -1)
        nl, nc = np.linalg.norm(fl, axis=1), np.linalg.norm(fc, axis=1)
        with np.errstate(all="ignore"):
            cos = np.einsum("bj,bj->b", fl, fc) / (nl * nc)
        l2 = np.linalg.norm(fl - fc, axis=1)
        rows.append({"set": P.label, "what": "Jacobian d T / d x0 (learned) vs d grad / d x0 = (1/N) A^T A (constructed)",
                     "cosine_mean": _f(np.nanmean(cos)), "cosine_min": _f(np.nanmin(cos)),
                     "l2_mean": _f(np.mean(l2)), "l2_max": _f(np.max(l2)),
                     "relative_l2_mean": _f(np.mean(l2 / np.where(nc > 0, nc, np.nan)))})
    return rows


def _poly_items(m: SeqModel, con, top: int):
    import flint

    from verify.prover.proof import entry_name

    from .poly import FlintProblem, as_mpoly, compare_polys, flint_layers, fq

    fp = FlintProblem(con)
    nm = var_names(con)
    A, b, x = fp.v[nm["A"]], fp.v[nm["b"]], fp.v[nm["x"]]
    n, d = m.n, m.d
    u = ops.zeros_like_object((n + 1, 2 * d + 2))
    u[:n, :d], u[:n, d] = A, b
    u[n, d + 1:2 * d + 1], u[n, 2 * d + 1] = x, 1
    u = fp.array(u)
    conv = np.vectorize(fq, otypes=[object])
    S = ops.mm(u, conv(_exact_array(m.embed).T))
    layers = flint_layers(m.layers)
    for i, L in enumerate(layers[:-1]):
        t0 = time.perf_counter()
        S = L.forward(S)
        yield {"kind": "layer", "layer": i, "max_terms": max(len(as_mpoly(fp, s)) for s in S.flat),
               "seconds": time.perf_counter() - t0}
    t0 = time.perf_counter()
    row = layers[-1].forward_rows(S, [n]) if layers else S[[n]]
    out = ops.mm(row, conv(_exact_array(m.readout).T))
    eta = construction_step_size(con)
    step = con.step(fp.sp.v)[nm["x"]]
    # self-check: the exact polynomials evaluated at a few small integer inputs against the float forward
    rng = np.random.default_rng(0)
    pts = rng.integers(-2, 3, size=(3, len(fp.names)))
    vals = [dict(zip(fp.names, pt)) for pt in pts]
    Ab = np.array([[[v[entry_name(nm['A'], (i, j))] for j in range(d)] for i in range(n)] for v in vals], dtype=float)
    bb = np.array([[v[entry_name(nm['b'], (i,))] for i in range(n)] for v in vals], dtype=float)
    xb = np.array([[v[entry_name(nm['x'], (j,))] for j in range(d)] for v in vals], dtype=float)
    flt = m.predict(Ab, bb, xb)
    for j in range(d):
        g = fp.poly((fp.sp.v[nm["x"]][j] - step[j]) * (1 / (eta * n)))
        pl = as_mpoly(fp, out[0, j])
        ex = np.array([float(pl(*[flint.fmpq(int(x)) for x in pt])) for pt in pts])
        chk = float(np.max(np.abs(ex - flt[:, j]) / np.maximum(1.0, np.abs(ex))))
        yield {"kind": "entry", "output": j, "seconds": time.perf_counter() - t0,
               "float_forward_check": chk, **compare_polys(g, pl, fp.names, top=top)}


def polynomial_view(m: SeqModel, con, *, top: int = 10, max_vars: int = 40, timeout: float = 300.0,
                    memory_gb: float | None = 8.0) -> dict:
    import flint

    from .poly import run_limited

    nvars = m.n * m.d + m.n + m.d
    if nvars > max_vars:
        return {"supported": False, "reason": f"{nvars} input variables (N={m.n}, D={m.d}; > {max_vars}); "
                                              f"train at small N, D for the exact view"}
    t0 = time.perf_counter()
    items, status = run_limited(lambda: _poly_items(m, con, top), timeout=timeout, memory_gb=memory_gb)
    ents = [{k: v for k, v in it.items() if k != "kind"} for it in items if it["kind"] == "entry"]
    return {"supported": True, "variables": nvars, "backend": f"python-flint {flint.__version__} fmpq_mpoly",
            "limits": {"timeout_s": timeout, "memory_gb": memory_gb},
            "what": "each output component at the query token, learned T(A, b, x0) against (1/N) A^T (A x0 - b)",
            "finished": status == "done", "reason": None if status == "done" else status,
            "seconds": time.perf_counter() - t0, "layers": [it for it in items if it["kind"] == "layer"],
            "outputs": ents}


def iterate(m: SeqModel, con, P: Problems, iters: int = 100, diverge_factor: float = 10.0) -> dict:
    from .analyses import error_curve_summary

    def curve(grad):
        x, errs = P.x0.copy(), []
        for it in range(iters + 1):
            if it:
                with np.errstate(all="ignore"):
                    x = x - m.eta * grad(x)
            with np.errstate(all="ignore"):
                e = float(np.mean(np.sum((x - P.x_star) ** 2, axis=-1)))
            errs.append(e if math.isfinite(e) else float("inf"))
            if not math.isfinite(e):
                errs += [float("inf")] * (iters - it)
                break
        return errs

    el = curve(lambda x: m.predict(P.A, P.b, x))
    ec = curve(lambda x: constructed_gradient(con, P.A, P.b, x))
    return {"set": P.label, "error": f"mean ||x - x*||^2, x <- x - {m.eta:.4g} T(A, b, x)", "iters": iters,
            "learned": error_curve_summary(el, diverge_factor), "constructed": error_curve_summary(ec, diverge_factor),
            "curve_learned": el, "curve_constructed": ec}


NOT_APPLICABLE = ("invariants, the interpolation curve, the implicit w^l, the layer-by-layer state differences "
                  "and --weights need the construction's layout; a SequenceModel has its own learned "
                  "embedding and read-out")


def compare_sequence_model(m: SeqModel, con, sets, iter_sets, *, iters: int = 100, skip=(),
                           poly_timeout: float = 300.0, poly_memory_gb: float | None = 8.0) -> dict:
    from .models import sizes

    if var_names(con) is not LS_NAMES:
        raise CompareError(f"{con.name}: not a least-squares GD construction (A, b, x, q) to compare a gradient model with")
    construction_step_size(con)
    if sizes(con) != (m.n, m.d):
        raise CompareError(f"the model was trained at N={m.n}, D={m.d}; the construction is at {sizes(con)}")
    rep = {"construction": con.name, "reference": con.reference, "n": m.n, "d": m.d, "k": 1,
           "layers": len(m.layers), "learned_kind": "SequenceModel (numerics.training): gradient task",
           "problem_sets": [P.label for P in sets], "not_applicable": NOT_APPLICABLE}
    if "functional" not in skip:
        rep["functional"] = functional(m, con, sets)
    if "sensitivities" not in skip:
        rep["sensitivities"] = sensitivities(m, con, sets)
    if "polynomial" not in skip:
        rep["polynomial_model"] = polynomial_view(m, con, timeout=poly_timeout, memory_gb=poly_memory_gb)
    if "iterate" not in skip:
        rep["iterate"] = [iterate(m, con, P, iters) for P in iter_sets]
    return rep

