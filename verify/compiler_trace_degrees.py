"""The degree bounds behind ``verify.compiler_trace``'s error bound: per layer, from the weights'
nonzero patterns (a BaseConv inner channel's degree is its gate side's plus its convolution side's; an
LSA / ELSA stage at most triples it), and the circuit's node degrees; the Schwartz-Zippel union bound
over them, and the number of random points that brings it to the target (the module docstring of
``verify.compiler_trace``)."""
from __future__ import annotations

import numpy as np

from .compiler_trace_modp import node_values

NEG = -np.inf  # degree of an identically zero value


def max_deg(a) -> float:
    """The largest degree bound in ``a`` (:data:`NEG` for none)."""
    a = np.asarray(a, dtype=float)
    return float(a.max()) if a.size else NEG


def lin_deg(du: np.ndarray, W: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per output column: the degree bound of ``u W + B`` (``du`` per input channel)."""
    d = np.where(W != 0, du[:, None], NEG).max(axis=0) if W.size else np.full(W.shape[1], NEG)
    return np.maximum(d, np.where((b != 0).any(axis=0), 0.0, NEG))


def baseconv_degrees(L: dict, du: np.ndarray):
    """Per channel degree bounds of a BaseConv layer's gate, convolution and product sides and
    of its output (seed 000 eq. (19): each side is affine in ``u``, the product adds them)."""
    dg = lin_deg(du, L["W_gate"], L["b_gate"])
    dz = np.where((L["h"] != 0).any(axis=0), lin_deg(du, L["W_in"], L["b_in"]), NEG)
    dz = np.maximum(dz, np.where((L["b_conv"] != 0).any(axis=0), 0.0, NEG))
    dp = dg + dz
    dy = lin_deg(dp, L["W_out"], L["b_out"])
    if L["residual"]:
        dy = np.maximum(dy, du)
    return dg, dz, dp, dy


def attention_degrees(L: dict, du: np.ndarray) -> np.ndarray:
    """An LSA layer / ELSA module: each stage's heads are cubic in its input (seed 001 eq. (8),
    (16)), the skip connection adds the input."""
    d = max(max_deg(du), 0.0)
    for _stage in L["stages"]:
        d = 3 * d
    if L["residual"]:
        d = max(d, max_deg(du))
    return np.full(du.shape, d)


def error_bound(pairs_deg: list[tuple[int, float]], draws: int, p: int) -> float:
    """The union bound on a wrong label, ``(pairs, degree)`` counts, ``draws`` points mod ``p``."""
    return float(sum(pairs * (draws + 1) * (d / p) ** (draws - 1) for pairs, d in pairs_deg))


def layer_degrees(graphs, names, layer_res: list, p: int, shape) -> list[tuple[int, float]]:
    """``(cells labelled, degree bound)`` of the input state and of the state after each layer
    (``layer_res``: the layers on residues, ``verify.prover.modular.layer_residues``; ``shape``: the
    state's tokens x channels); every bound is at least the circuits' (``graphs``) largest node degree."""
    T, Cn = shape
    dmax_nodes = 1
    for gr in graphs:
        _, node_deg = node_values(gr, {n: np.ones(1, np.int64) for n in names}, p, lambda c: 1, 1)
        dmax_nodes = max([dmax_nodes] + list(node_deg.values()))
    du = np.ones(Cn)
    degs = [(T * Cn, max(1.0, dmax_nodes))]
    for Lr in layer_res:
        if Lr["kind"] == "baseconv":
            dg, dz, dp, dy = baseconv_degrees(Lr, du)
            d = max(1.0, dmax_nodes, max_deg(dg), max_deg(dz), max_deg(dp), max_deg(dy))
            cells = T * Cn + 3 * T * len(dp)
        else:
            dy = attention_degrees(Lr, du)
            d = max(1.0, dmax_nodes, max_deg(dy))
            # and every head's query, key and value sides and the cells it writes (verify.compiler_trace's HeadTrace)
            cells = T * Cn + sum(T * (sum(hd[k][1].shape[1] for k in ("q", "k", "v")) + Cn)
                                 for stage in Lr.get("stages", ()) for hd in stage)
        degs.append((cells, d))
        du = dy
    return degs


def choose_draws(degs: list, graphs, p: int, draws: int | None, error_target: float,
                  max_draws: int) -> tuple[int, float]:
    """The number of random points (``draws``, or the fewest, at least 3 and at most ``max_draws``, that
    bring the bound to ``error_target``) and the bound on a wrong label there: every labelled cell
    (``degs``) against every node value of ``graphs``, the constants and zero."""
    classes = sum(gr.number_of_nodes() for gr in graphs) + 2  # every node value, the constants, zero
    pairs = [(cells * classes, d) for cells, d in degs]
    if draws is None:
        draws = 3
        while draws < max_draws and error_bound(pairs, draws, p) > error_target:
            draws += 1
    if draws < 2:
        raise ValueError(f"draws {draws}: labels need at least 2 random points")
    return draws, min(1.0, error_bound(pairs, draws, p))
