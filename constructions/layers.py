"""Layer definitions, each exactly as its paper defines it, written once.

Every ``forward`` runs on numpy float arrays (any leading batch axes), numpy
object arrays of exact scalars (one problem, 2-D), torch tensors and cupy
arrays; see ``constructions/ops.py`` for the dispatch and the convolution
semantics.  Weights are stored as numpy object arrays of exact scalars
(``int``/``Fraction``/sympy); ``Layer.map`` converts them for a backend.

* :class:`BaseConv`   seed 000 eq. (2)/(19), bias matrices as in Def. D.20.
* :class:`LSA`        seed 001 eq. (8), multi-head as a sum of heads (eq. 39).
* :class:`TokenLSA`   seed 004 eq. (2)-(3): the token form with (P, Q).
* :class:`ELSA`       seed 001 eq. (16); sequential multi-head stages with one
                      skip connection around them (eq. 57-59).
"""
from __future__ import annotations

import abc

from dataclasses import dataclass, replace
from typing import Callable, ClassVar

import numpy as np

from . import ops
from .plans import LivePlan, sparse_heads_forward, sparse_head  # noqa: F401 (sparse_head: the heads' plan)
from .sparse import SparseMatrix, map_weight


class Layer(abc.ABC):
    """Common interface: ``forward(u)``, ``arrays()``, ``map(f)``, ``config()``."""

    kind: ClassVar[str] = "layer"
    #: names of the array-valued fields (weights), in export order
    array_fields: ClassVar[tuple[str, ...]] = ()

    @abc.abstractmethod
    def forward(self, u, *, conv_method: str = "direct"):
        """Apply the layer to a state."""

    @abc.abstractmethod
    def arrays(self) -> dict[str, np.ndarray]:
        """Flat ``name -> array`` view of every weight (for export)."""

    @abc.abstractmethod
    def map(self, f: Callable[[np.ndarray], object]) -> "Layer":
        """The same layer with ``f`` applied to every weight array."""

    def config(self) -> dict:
        """The non-array settings (for export)."""
        return {}

    @classmethod
    @abc.abstractmethod
    def names_for(cls, config: dict) -> list[str]:
        """The names ``arrays()`` has for a layer with these settings (a weight file's
        tensors for it, no more, no fewer); a ValueError names a malformed setting."""

    @classmethod
    @abc.abstractmethod
    def from_arrays(cls, config: dict, arrays: dict[str, np.ndarray]) -> "Layer":
        """Inverse of ``arrays()`` + ``config()`` (``config`` already validated by ``names_for``)."""

    def prepare(self, nonzero=None) -> "Layer":
        """Precompute what a float forward can reuse (default: nothing).  ``nonzero``: a function
        giving an array's nonzero pattern, for a caller that already knows it (the prover)."""
        return self

    def forward_rows(self, u, rows, cols=None):
        """Rows ``rows`` (and columns ``cols``) of ``forward(u)``.  The default runs the whole
        forward; a layer whose rows can be computed separately overrides it (BaseConv), which is
        what bounds the memory of a dense exact (symbolic) forward."""
        y = self.forward(u)[list(rows)]
        return y if cols is None else y[:, list(cols)]


# --------------------------------------------------------------------------- BaseConv

@dataclass
class BaseConv(Layer):
    r"""One BaseConv layer, seed 000 eq. (2)/(19) with bias matrices (Def. D.20):

    .. math::
        y = \big((u W_{gate} + B_{gate}) \odot (h * (u W_{in} + B_{in}) + B_{conv})\big) W_{out} + B_{out}

    ``u`` is (T, C): T tokens (rows), C channels (columns).  ``W_*`` are
    (C, C); the biases and the filter ``h`` are (T, C), position dependent.
    ``causal=True`` is linear convolution truncated to T outputs,
    ``causal=False`` circular convolution of length T, and ``same=True`` (with
    ``causal=False``) the zero-padded centred convolution, tap ``j`` at lag
    ``j - (T-1)//2`` (``ops.conv``; the third convention, precision-ls's non-causal
    ``Conv1d(padding=K//2)``).  ``same`` appears in :meth:`config` only when True, so
    weight files of the two older conventions read as before.
    ``residual=True`` returns ``u + y`` (the skip connection of seed 000
    App. D.2.1 READ is applied outside ``W_out`` here; the constructions of
    this toolkit do not rely on it).
    """

    W_in: np.ndarray
    b_in: np.ndarray
    h: np.ndarray
    b_conv: np.ndarray
    W_gate: np.ndarray
    b_gate: np.ndarray
    W_out: np.ndarray
    b_out: np.ndarray
    causal: bool = False
    residual: bool = False
    same: bool = False

    kind: ClassVar[str] = "baseconv"
    array_fields: ClassVar[tuple[str, ...]] = (
        "W_in", "b_in", "h", "b_conv", "W_gate", "b_gate", "W_out", "b_out")

    @classmethod
    def zeros(cls, T: int, C: int, *, causal: bool = False, residual: bool = False) -> "BaseConv":
        z = lambda *s: ops.zeros_like_object(s)  # noqa: E731
        return cls(z(C, C), z(T, C), z(T, C), z(T, C), z(C, C), z(T, C), z(C, C), z(T, C),
                   causal=causal, residual=residual)

    @classmethod
    def from_entries(cls, T: int, C: int, entries: dict, *, causal: bool = False,
                     residual: bool = False) -> "BaseConv":
        """A layer from its nonzero entries, ``{field: {(i, j): value}}`` (each value read as a
        ``Fraction``; a missing field is zero): the three ``C x C`` channel mixes held as
        :class:`~constructions.sparse.SparseMatrix` (no ``C^2`` array is built), the ``T x C``
        filter and biases dense (state-sized).  What a compiler emits."""
        from fractions import Fraction

        unknown = set(entries) - set(cls.array_fields)
        if unknown:
            raise ValueError(f"BaseConv has no weight {sorted(unknown)[0]!r}")
        arrays = {}
        for name in cls.array_fields:
            ent = entries.get(name, {})
            if name in ("W_in", "W_gate", "W_out"):
                arrays[name] = SparseMatrix.from_entries((C, C), ent)
            else:
                A = ops.zeros_like_object((T, C))
                for (i, j), v in ent.items():
                    A[i, j] = A[i, j] + Fraction(v)
                arrays[name] = A
        return cls(**arrays, causal=causal, residual=residual)

    def forward(self, u, *, conv_method: str = "direct"):
        fast = self.__dict__.get("_plan")  # set by prepare() on float weights
        if fast is not None and conv_method == "direct":
            y = fast(u)
            return u + y if self.residual else y
        if not ops.is_object(u):
            g = ops.add(ops.mm(u, self.W_gate), self.b_gate)
            z = ops.add(ops.conv(ops.add(ops.mm(u, self.W_in), self.b_in), self.h, causal=self.causal,
                                 method=conv_method, same=self.same), self.b_conv)
            y = ops.add(ops.mm(ops.hadamard(g, z), self.W_out), self.b_out)
            return ops.add(u, y) if self.residual else y
        # exact: each pattern found once (the weights': by prepare() on the prover's copy)
        nz = self.__dict__.get("_exact_nonzero", {})
        nu = ops.nonzero_pattern(u)
        g = ops.add(ops.mm(u, self.W_gate, nonzero_x=nu, nonzero_y=nz.get("W_gate")), self.b_gate,
                    nonzero_y=nz.get("b_gate"))
        v = ops.add(ops.mm(u, self.W_in, nonzero_x=nu, nonzero_y=nz.get("W_in")), self.b_in,
                    nonzero_y=nz.get("b_in"))
        # the convolution is only formed where the gate is not zero (it is multiplied by the
        # gate next), which is what makes masked route layers cheap
        need = ops.nonzero_pattern(g)
        z = ops.add(ops.conv(v, self.h, causal=self.causal, method=conv_method, need=need, same=self.same,
                             nonzero_h=nz.get("h")), self.b_conv, nonzero_y=nz.get("b_conv"))
        y = ops.add(ops.mm(ops.hadamard(g, z, nonzero_x=need), self.W_out, nonzero_y=nz.get("W_out")),
                    self.b_out, nonzero_y=nz.get("b_out"))
        return ops.add(u, y, nonzero_x=nu) if self.residual else y

    def forward_rows(self, u, rows, cols=None):
        """Rows ``rows`` / columns ``cols`` of :meth:`forward` (2-D states): the convolution needs
        every row of ``u W_in + B_in``, but the gate, the product and ``W_out`` only the rows (and
        output columns) asked for.  Same sums as ``forward``, fewer of them."""
        rows = list(rows)
        cols = list(range(self.W_out.shape[1])) if cols is None else list(cols)
        v = ops.add(ops.mm(u, self.W_in), self.b_in)
        z = ops.add(ops.conv(v, self.h, causal=self.causal, same=self.same), self.b_conv)[rows]
        g = ops.add(ops.mm(u[rows], self.W_gate), self.b_gate[rows])
        W = self.W_out[:, cols]
        y = self.b_out[rows][:, cols]
        # (g . z) W_out one inner channel at a time: for exact polynomials only one product is alive
        for c in range(W.shape[0]):
            y = ops.add(y, ops.mm(ops.hadamard(g[:, c:c + 1], z[:, c:c + 1]), W[c:c + 1]))
        return ops.add(u[rows][:, cols], y) if self.residual else y

    def prepare(self, nonzero=None) -> "BaseConv":
        """Plan the float forward once (after a cast): :class:`LivePlan`, the layer on its live
        inner channels only (the direct convolution per channel class, ``ops.ConvPlan``; zero bias
        matrices skipped).  The arithmetic is the same sums of the same nonzero terms.  Exact weights, with ``nonzero`` (the
        prover's converted copy, whose weights never change): the nonzero patterns of every
        weight, found once rather than on every forward (the three C x C matrices hold C^2
        entries each: at N=64, D=16 the causal GD layer's 594^2, nine times its state)."""
        if self.h.dtype != object:
            self.__dict__["_plan"] = LivePlan(self)
        elif nonzero is not None:  # a sparse weight's product reads its entries, it has no pattern to find
            self.__dict__["_exact_nonzero"] = {k: nonzero(getattr(self, k)) for k in self.array_fields
                                               if not isinstance(getattr(self, k), SparseMatrix)}
        return self

    def arrays(self):
        return {k: getattr(self, k) for k in self.array_fields}

    def map(self, f):
        return replace(self, **{k: map_weight(f, getattr(self, k)) for k in self.array_fields})

    def config(self):
        c = {"causal": self.causal, "residual": self.residual}
        if self.same:
            c["same"] = True
        return c

    @property
    def convolution(self) -> str:
        """The convention's name: ``"causal"``, ``"circular"`` or ``"same"``."""
        return "same" if self.same else ("causal" if self.causal else "circular")

    @classmethod
    def names_for(cls, config):
        causal = _flag(config, "causal")
        _flag(config, "residual")
        if "same" in config and _flag(config, "same") and causal:
            raise ValueError("settings 'causal' and 'same' cannot both be true")
        return list(cls.array_fields)

    @classmethod
    def from_arrays(cls, config, arrays):
        return cls(**{k: arrays[k] for k in cls.array_fields}, causal=config["causal"], residual=config["residual"],
                   same=bool(config.get("same", False)))

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.b_in.shape)

    def flops(self) -> int:
        """Multiply-adds x2 of one forward on one (T, C) input, direct convolution."""
        T, C = self.shape
        mm = 2 * T * C * C
        conv = 2 * T * T * C if not self.causal else T * (T + 1) * C  # "same": at most the circular count
        return 3 * mm + conv + 6 * T * C


# --------------------------------------------------------------------------- LSA (seed 001)

@dataclass
class LSAHead:
    """One head (W1, W2, W3) of seed 001 eq. (8); each (n, n)."""

    W1: np.ndarray
    W2: np.ndarray
    W3: np.ndarray


@dataclass
class LSA(Layer):
    r"""Multi-head linear self-attention in Hagiwara's form, seed 001 eq. (8), (39):

    .. math:: \mathrm{LSA}(H) = \sum_k (H W_{k,3}) (H W_{k,1})^\top (H W_{k,2})

    ``H`` is (m, n) and each ``W`` is (n, n).  Note the sum runs over the m
    *rows* of H and the weights act on its columns: the transpose of the
    usual token-major convention (seed 001 eq. (9)).  ``residual=True`` is
    the module of eq. (38): ``H + LSA(H)``.
    """

    heads: list[LSAHead]
    residual: bool = True

    kind: ClassVar[str] = "lsa"

    def forward(self, H, *, conv_method: str = "direct"):
        fast = self.__dict__.get("_plan")  # set by prepare() on float weights
        if fast is not None:
            return sparse_heads_forward(H, fast, self.residual)
        out = None
        for hd in self.heads:
            K = ops.mm(H, hd.W1)
            V = ops.mm(H, hd.W2)
            Qm = ops.mm(H, hd.W3)
            term = ops.mm(Qm, ops.mm(ops.transpose(K), V))
            out = term if out is None else ops.add(out, term)
        return ops.add(H, out) if self.residual else out

    def prepare(self, nonzero=None) -> "LSA":
        """Plan the forward once, on a layer whose weights will not change (a float cast, or the
        prover's exact copy): each head on the rows and columns where its weights are nonzero
        (compiled stacks have many sparse heads).  The same sums; the terms skipped are zeros."""
        if self.heads:
            self.__dict__["_plan"] = [[sparse_head(hd.W1, None, hd.W2, None, hd.W3, None, nonzero=nonzero)
                                       for hd in self.heads]]
        return self

    def arrays(self):
        d = {}
        for i, hd in enumerate(self.heads):
            d[f"head{i}.W1"], d[f"head{i}.W2"], d[f"head{i}.W3"] = hd.W1, hd.W2, hd.W3
        return d

    def map(self, f):
        return replace(self, heads=[LSAHead(*(map_weight(f, w) for w in (h.W1, h.W2, h.W3))) for h in self.heads])

    def config(self):
        return {"residual": self.residual, "heads": len(self.heads)}

    @classmethod
    def names_for(cls, config):
        _flag(config, "residual")
        return [f"head{i}.{w}" for i in range(_count(config)) for w in ("W1", "W2", "W3")]

    @classmethod
    def from_arrays(cls, config, arrays):
        return cls([LSAHead(arrays[f"head{i}.W1"], arrays[f"head{i}.W2"], arrays[f"head{i}.W3"])
                    for i in range(config["heads"])], residual=config["residual"])


@dataclass
class TokenLSAHead:
    """One head (P, Q) of seed 004 eq. (2); each (d+1, d+1)."""

    P: np.ndarray
    Q: np.ndarray


@dataclass
class TokenLSA(Layer):
    r"""Linear self-attention in the token form of seed 004 eq. (2)-(3):

    .. math:: e_i \leftarrow e_i + \sum_k \sum_{j \in \mathrm{keys}} (e_j^\top Q_k e_i)\, P_k e_j

    Tokens are the rows of ``E`` (T, d+1).  With ``exclude_last=True`` the
    keys/values are the first T-1 tokens only (seed 004 Sec. 2: the query
    token, last, is never a key), while every token is updated.  In matrix
    form ``E <- E + E Q_k^T (E_ctx^T E_ctx) P_k^T``; with all tokens as keys
    this is Hagiwara's LSA with ``W3 W1^T = Q^T`` and ``W2 = P^T``.
    Seed 004 reads the prediction as the *negated* last coordinate of the
    last token.
    """

    heads: list[TokenLSAHead]
    exclude_last: bool = True
    residual: bool = True

    kind: ClassVar[str] = "token_lsa"

    def forward(self, E, *, conv_method: str = "direct"):
        ctx = E[..., :-1, :] if self.exclude_last else E
        G = ops.mm(ops.transpose(ctx), ctx)  # sum_j e_j e_j^T, (d+1, d+1)
        out = None
        for hd in self.heads:
            S = ops.mm(ops.mm(ops.transpose(hd.Q), G), ops.transpose(hd.P))
            term = ops.mm(E, S)
            out = term if out is None else ops.add(out, term)
        return ops.add(E, out) if self.residual else out

    def arrays(self):
        d = {}
        for i, hd in enumerate(self.heads):
            d[f"head{i}.P"], d[f"head{i}.Q"] = hd.P, hd.Q
        return d

    def map(self, f):
        return replace(self, heads=[TokenLSAHead(map_weight(f, h.P), map_weight(f, h.Q)) for h in self.heads])

    def config(self):
        return {"residual": self.residual, "exclude_last": self.exclude_last, "heads": len(self.heads)}

    @classmethod
    def names_for(cls, config):
        _flag(config, "residual"), _flag(config, "exclude_last")
        return [f"head{i}.{w}" for i in range(_count(config)) for w in ("P", "Q")]

    @classmethod
    def from_arrays(cls, config, arrays):
        return cls([TokenLSAHead(arrays[f"head{i}.P"], arrays[f"head{i}.Q"]) for i in range(config["heads"])],
                   exclude_last=config["exclude_last"], residual=config["residual"])


# --------------------------------------------------------------------------- ELSA (seed 001)

@dataclass
class ELSAHead:
    """One head of seed 001 eq. (16): weights (n, n) and bias matrices (m, n)."""

    W1: np.ndarray
    B1: np.ndarray
    W2: np.ndarray
    B2: np.ndarray
    W3: np.ndarray
    B3: np.ndarray


@dataclass
class ELSA(Layer):
    r"""Extended linear self-attention, seed 001 eq. (16):

    .. math:: \mathrm{ELSA}(H) = (H W_3 + B_3)(H W_1 + B_1)^\top (H W_2 + B_2)

    One ``ELSA`` layer is the module of seed 001 eq. (57)-(59): ``stages`` is
    a list of multi-head ELSA blocks applied one after another (each block
    the sum of its heads), and ``residual=True`` adds the module's input to
    the last block's output (a single skip around all stages).
    """

    stages: list[list[ELSAHead]]
    residual: bool = True

    kind: ClassVar[str] = "elsa"

    @staticmethod
    def head(H, hd: ELSAHead):
        K = ops.add(ops.mm(H, hd.W1), hd.B1)
        V = ops.add(ops.mm(H, hd.W2), hd.B2)
        Qm = ops.add(ops.mm(H, hd.W3), hd.B3)
        return ops.mm(Qm, ops.mm(ops.transpose(K), V))

    def prepare(self, nonzero=None) -> "ELSA":
        """As :meth:`LSA.prepare`: each head on its nonzero rows and columns (float weights)."""
        if self.stages and self.stages[0]:
            self.__dict__["_plan"] = [[sparse_head(hd.W1, hd.B1, hd.W2, hd.B2, hd.W3, hd.B3, nonzero=nonzero)
                                       for hd in st]
                                      for st in self.stages]
        return self

    def forward(self, H, *, conv_method: str = "direct"):
        fast = self.__dict__.get("_plan")
        if fast is not None:
            return sparse_heads_forward(H, fast, self.residual)
        P = H
        for stage in self.stages:
            acc = None
            for hd in stage:
                term = self.head(P, hd)
                acc = term if acc is None else ops.add(acc, term)
            P = acc
        return ops.add(H, P) if self.residual else P

    def arrays(self):
        d = {}
        for s, stage in enumerate(self.stages):
            for k, hd in enumerate(stage):
                for f in ("W1", "B1", "W2", "B2", "W3", "B3"):
                    d[f"stage{s}.head{k}.{f}"] = getattr(hd, f)
        return d

    def map(self, f):
        return replace(self, stages=[[ELSAHead(*(map_weight(f, getattr(hd, n)) for n in self._HEAD_FIELDS))
                                      for hd in st] for st in self.stages])

    def config(self):
        return {"residual": self.residual, "heads": [len(s) for s in self.stages]}

    _HEAD_FIELDS: ClassVar[tuple[str, ...]] = ("W1", "B1", "W2", "B2", "W3", "B3")

    @classmethod
    def names_for(cls, config):
        _flag(config, "residual")
        heads = config.get("heads")
        if not isinstance(heads, list) or len(heads) > 64:
            raise ValueError(f"setting 'heads' must be a list of head counts, got {heads!r}")
        counts = [_count({"heads": nh}) for nh in heads]
        return [f"stage{s}.head{k}.{f}" for s, nh in enumerate(counts) for k in range(nh) for f in cls._HEAD_FIELDS]

    @classmethod
    def from_arrays(cls, config, arrays):
        return cls([[ELSAHead(*(arrays[f"stage{s}.head{k}.{f}"] for f in cls._HEAD_FIELDS)) for k in range(nh)]
                    for s, nh in enumerate(config["heads"])], residual=config["residual"])


#: every layer type by its ``kind`` (weight files, training modules); a new layer type is one
#: ``Layer`` subclass added here
LAYER_TYPES: dict[str, type[Layer]] = {c.kind: c for c in (BaseConv, LSA, TokenLSA, ELSA)}


def _flag(config: dict, key: str) -> bool:
    v = config.get(key)
    if not isinstance(v, bool):
        raise ValueError(f"setting {key!r} must be true or false, got {v!r}")
    return v


def _count(config: dict, key: str = "heads", hi: int = 4096):
    v = config.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= hi:
        raise ValueError(f"setting {key!r} must be an integer in [0, {hi}], got {v!r}")
    return v


def array_names(kind: str, config: dict) -> list[str]:
    """The array names a layer of this kind and settings has (:meth:`Layer.names_for`)."""
    if not isinstance(config, dict):
        raise ValueError(f"layer settings must be an object, got {type(config).__name__}")
    if kind not in LAYER_TYPES:
        raise ValueError(f"unknown layer kind {kind!r}")
    return LAYER_TYPES[kind].names_for(config)


def layer_from_arrays(kind: str, config: dict, arrays: dict[str, np.ndarray]) -> Layer:
    """Inverse of ``Layer.arrays()`` + ``Layer.config()`` (used by the weight files).
    Settings are validated (:func:`array_names`); ``arrays`` must hold the arrays
    of that layer (a KeyError names a missing one)."""
    array_names(kind, config)
    return LAYER_TYPES[kind].from_arrays(config, arrays)
