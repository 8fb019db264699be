"""Seed 001 Sec. 2.2-2.4: mask-and-move, the LSA matrix product, ELSA Properties 2-4.

Indices in the paper are 1-based with inclusive ranges ``A[i:j, k:l]``; the
Python builders below take the paper's indices as printed and convert.

* ``s001-mask-move``   Property 1, eq. (2), (4), (5)-(7): ``W A V = MskMov(A)``
  with ``W = W_K``, ``K = {(i'+a, i') : i <= i' <= j}`` and ``V = V_J``,
  ``J = {(k', k'+b) : k <= k' <= l}``; an identity in the symbolic entries of
  ``A`` (``prove_identity``).
* ``s001-lsa-product`` eq. (10)-(15): one LSA layer (eq. (8), no skip) maps
  ``H = [[A, O, O], [O, B, I_s]]`` to ``[[O, AB], [O, O]]``.
* ``s001-elsa-constant`` Property 2, eq. (17)-(18): one ELSA layer (eq. (16),
  one stage, one head, no skip) outputs a constant ``C`` for every ``H``; the
  proof is symbolic in every entry of ``C``.
* ``s001-elsa-identity`` Property 3, eq. (19)-(20): one ELSA layer outputs ``H``.
* ``s001-elsa-product`` Property 4, eq. (21)-(25) (``form=1``) and eq.
  (26)-(30) (``form=2``): one ELSA layer outputs ``AB`` in the top right block.

Properties 2 and 3 distinguish the cases m > n, m < n and m = n; the builders
pick the paper's weights for the case of the given (m, n), so ``--set m=..
--set n=..`` selects the case (default: m > n).

Notes on the text (dimension slips, no effect on the constructions): the
proofs of Property 2 and of Property 4 (after eq. (23)) write ``W_k = O_{m,m}``
and ``W_3 = O_{m,m}`` for weights that are ``n x n`` (eq. (16)); the
proof of Property 1 calls the column selector ``V_K`` where eq. (4) defines
``V_J``.  The builders use ``n x n``.
"""
from __future__ import annotations

import functools

from fractions import Fraction

import numpy as np

from constructions.claims import IdentityClaim
from constructions import ops
from constructions.base import FunctionConstruction
from constructions.layers import ELSA, LSA, ELSAHead, LSAHead
from constructions.layout import Layout
from constructions.weights import mask_move, selector

from . import CatalogueEntry, register

REF_P1 = "seed 001 Sec. 2.2, Property 1, eq. (2), (4), (5)-(7)"
REF_LSA = "seed 001 Sec. 2.3, eq. (8), (10)-(15)"
REF_P2 = "seed 001 Sec. 2.4, Property 2, eq. (16)-(18)"
REF_P3 = "seed 001 Sec. 2.4, Property 3, eq. (16), (19)-(20)"
REF_P4 = "seed 001 Sec. 2.4, Property 4, eq. (16), (21)-(25) and (26)-(30)"


def _Z(*shape):
    return ops.zeros_like_object(shape)


def _I(n):
    M = _Z(n, n)
    for i in range(n):
        M[i, i] = 1
    return M


def _block(m, n, blocks):
    """An (m, n) exact matrix with ``blocks = {(row0, col0): array}`` placed."""
    M = _Z(m, n)
    for (r0, c0), B in blocks.items():
        B = np.asarray(B, dtype=object)
        M[r0:r0 + B.shape[0], c0:c0 + B.shape[1]] = B
    return M


# ============================================================== Property 1

def W_K(m: int, K) -> np.ndarray:
    """Eq. (2): ``W_K[i, j] = 1`` for ``(i, j)`` in ``K`` (1-based pairs), else 0."""
    W = _Z(m, m)
    for i, j in K:
        W[i - 1, j - 1] = 1
    return W


def V_J(n: int, J) -> np.ndarray:
    """Eq. (4): ``V_J[k, l] = 1`` for ``(k, l)`` in ``J`` (1-based pairs), else 0."""
    V = _Z(n, n)
    for k, l in J:
        V[k - 1, l - 1] = 1
    return V


def check_mskmov_indices(m, n, i, j, k, l, a, b) -> None:
    """The index conditions of Sec. 2.2 (before Property 1), or a ValueError."""
    ok = (1 <= i <= j <= m and 1 <= k <= l <= n and 1 <= i + a <= m and 1 <= j + a <= m
          and 1 <= k + b <= n and 1 <= l + b <= n)
    if not ok:
        raise ValueError(f"MskMov indices out of range: need 1 <= i <= j <= m, 1 <= k <= l <= n, "
                         f"1 <= i+a, j+a <= m, 1 <= k+b, l+b <= n; got m={m}, n={n}, i={i}, j={j}, "
                         f"k={k}, l={l}, a={a}, b={b}")


def mskmov_weights(m, n, i, j, k, l, a, b):
    """Proof of Property 1: ``W = W_K``, ``K = {(i'+a, i')}``; ``V = V_J``, ``J = {(k', k'+b)}``."""
    check_mskmov_indices(m, n, i, j, k, l, a, b)
    W = W_K(m, [(ip + a, ip) for ip in range(i, j + 1)])
    V = V_J(n, [(kp, kp + b) for kp in range(k, l + 1)])
    return W, V


def mskmov(A: np.ndarray, i, j, k, l, a, b) -> np.ndarray:
    """The definition of ``MskMov^{m,n,a,b}_{i,j,k,l}(A)``: the zero matrix with
    ``P[i+a:j+a, k+b:l+b] = A[i:j, k:l]`` (1-based, inclusive)."""
    A = np.asarray(A, dtype=object)
    P = _Z(*A.shape)
    P[i - 1 + a:j + a, k - 1 + b:l + b] = A[i - 1:j, k - 1:l]
    return P


def mask_move_identity(m: int = 4, n: int = 5, i: int = 2, j: int = 3, k: int = 2, l: int = 4,
                       a: int = -1, b: int = 1, *, W=None, V=None):
    """Property 1 / eq. (5): ``W A V == MskMov(A)`` for symbolic ``A`` (m x n).

    ``W``, ``V`` default to the weights of the proof of Property 1; pass
    others to check them (e.g. a perturbed pair, which must be rejected).
    """

    W0, V0 = mskmov_weights(m, n, i, j, k, l, a, b)
    W = W0 if W is None else W
    V = V0 if V is None else V

    def lhs(v):
        return ops.mm(ops.mm(W, v["A"]), V)

    def rhs(v):
        return mskmov(v["A"], i, j, k, l, a, b)

    def locate(e):
        r, c = e
        inside = i + a - 1 <= r < j + a and k + b - 1 <= c < l + b
        return f"MskMov(A)[{r + 1}, {c + 1}] (1-based; {'the moved block' if inside else 'outside the block: 0'})"

    return IdentityClaim(f"s001-mask-move (m={m}, n={n}, i={i}, j={j}, k={k}, l={l}, a={a}, b={b})",
                         {"A": (m, n)}, lhs, rhs, locate=locate)


def _mask_move_entry(m=4, n=5, i=2, j=3, k=2, l=4, dst_row=1, dst_col=3):
    """CLI form: the destination's top-left corner (1-based) instead of the shift (a, b),
    so that every size is a positive integer.  Default: eq. (7), the block
    ``A[i:j, k:l]`` moved to the upper right corner (a = -(i-1), b = n-l)."""
    return mask_move_identity(m, n, i, j, k, l, dst_row - i, dst_col - k)


register(CatalogueEntry(
    name="s001-mask-move", paper=REF_P1,
    summary="mask-and-move W A V = MskMov(A) (Property 1), identity in the symbolic entries of A",
    build=_mask_move_entry,
    sizes={"m": 4, "n": 5, "i": 2, "j": 3, "k": 2, "l": 4, "dst_row": 1, "dst_col": 3},
    claim="an m x m W and an n x n V move any block (Property 1); sizes: a = dst_row - i, b = dst_col - k"))


# ============================================================== one-layer constructions

# one-layer constructions: FunctionConstruction (epilogue only) from ``input_state(v) = embed(v)``, the
# input matrix H, to ``final_state(v) = spec(v)``, the output the paper states (depth 1)


def _elsa(W1, B1, W2, B2, W3, B3) -> ELSA:
    """One ELSA layer of eq. (16): one stage, one head, no skip connection."""
    return ELSA([[ELSAHead(W1, B1, W2, B2, W3, B3)]], residual=False)


def _case(m, n):
    return "m>n" if m > n else ("m<n" if m < n else "m=n")


def default_constant(m: int, n: int) -> np.ndarray:
    """A fixed rational constant matrix (the proof is symbolic in C anyway)."""
    C = _Z(m, n)
    for r in range(m):
        for c in range(n):
            C[r, c] = Fraction((r + 1) * (c + 2) - 2 * c - 3, c + 2)
    return C


def elsa_constant(m: int = 4, n: int = 3, C=None, **cparams) -> FunctionConstruction:
    """Property 2, eq. (17)-(18): ``ELSA(H) = B3 B1^T B2 = C`` with all ``W_k = O``.

    m > n: ``B1 = B2 = [I_n; O]``, ``B3 = C``.  m < n: ``B1 = B3 = [I_m O]``,
    ``B2 = C``.  m = n: ``B1 = B2 = I``, ``B3 = C``.  The entries of ``C`` are
    the parameters ``c_r_c``; the proof replaces them by fresh symbols.
    """
    if m < 1 or n < 1:
        raise ValueError(f"need m, n >= 1, got m={m}, n={n}")
    if cparams:
        C = _Z(m, n)
        for r in range(m):
            for c in range(n):
                C[r, c] = cparams[f"c_{r}_{c}"]
    C = default_constant(m, n) if C is None else np.asarray(C, dtype=object)
    if C.shape != (m, n):
        raise ValueError(f"C must be {m} x {n}, got {C.shape}")
    Zn = _Z(n, n)
    case = _case(m, n)
    if case == "m>n":
        Bt = _block(m, n, {(0, 0): _I(n)})                        # eq. (17)
        layer = _elsa(Zn, Bt, Zn.copy(), Bt.copy(), Zn.copy(), C.copy())
    elif case == "m<n":
        Bw = _block(m, n, {(0, 0): _I(m)})                        # eq. (18)
        layer = _elsa(Zn, Bw, Zn.copy(), C.copy(), Zn.copy(), Bw.copy())
    else:
        layer = _elsa(Zn, _I(m), Zn.copy(), _I(m), Zn.copy(), C.copy())
    lay = Layout((m, n), row_axis="rows of H", col_axis="columns of H")
    lay.add("C", (0, m), (0, n), "the output: the constant C (input: any H)")
    params = {f"c_{r}_{c}": C[r, c] for r in range(m) for c in range(n)}
    con = FunctionConstruction(
        name="s001-elsa-constant", reference=REF_P2, layout=lay, prologue=[], body=[], epilogue=[layer],
        params=params, variables={"H": (m, n)}, rebuild=functools.partial(elsa_constant, m, n),
        symbolic_params=tuple(params), notes=f"case {case}",
        make_input=lambda v: np.array(v["H"], dtype=object, copy=True),
        make_final=lambda v: np.array([[con.params[f"c_{r}_{c}"] for c in range(n)] for r in range(m)], dtype=object))
    return con


register(CatalogueEntry(
    name="s001-elsa-constant", paper=REF_P2,
    summary="ELSA outputs any constant C for every input H (Property 2; case m>n, m<n or m=n from the sizes)",
    build=elsa_constant, sizes={"m": 4, "n": 3},
    claim="one ELSA (one head, weights O, biases eq. (17)/(18)), output m x n = input size"))


def elsa_identity(m: int = 4, n: int = 3) -> FunctionConstruction:
    """Property 3, eq. (19)-(20): ``ELSA(H) = H`` (ELSA as a skip connection).

    m > n: ``B1 = B2 = [I_n; O]``, ``W3 = I_n``, ``W1 = W2 = O``, ``B3 = O``
    (``H W3 B1^T B2``).  m < n: ``B1 = B3 = [I_m O]``, ``W2 = I_n``,
    ``W1 = W3 = O``, ``B2 = O`` (``B3 B1^T H W2``).  m = n: ``W3 = I``,
    ``B1 = B2 = I``, ``W1 = W2 = O``, ``B3 = O``.
    """
    if m < 1 or n < 1:
        raise ValueError(f"need m, n >= 1, got m={m}, n={n}")
    Zn, Zb = (lambda: _Z(n, n)), (lambda: _Z(m, n))
    case = _case(m, n)
    if case == "m>n":
        Bt = _block(m, n, {(0, 0): _I(n)})                        # eq. (19)
        layer = _elsa(Zn(), Bt, Zn(), Bt.copy(), _I(n), Zb())
    elif case == "m<n":
        Bw = _block(m, n, {(0, 0): _I(m)})                        # eq. (20)
        layer = _elsa(Zn(), Bw, _I(n), Zb(), Zn(), Bw.copy())
    else:
        layer = _elsa(Zn(), _I(m), Zn(), _I(m), _I(m), Zb())
    lay = Layout((m, n), row_axis="rows of H", col_axis="columns of H")
    lay.add("H", (0, m), (0, n), "input and output: H")
    return FunctionConstruction(name="s001-elsa-identity", reference=REF_P3, layout=lay, prologue=[], body=[],
                                epilogue=[layer], params={}, variables={"H": (m, n)}, notes=f"case {case}",
                                make_input=lambda v: np.array(v["H"], dtype=object, copy=True),
                                make_final=lambda v: np.array(v["H"], dtype=object, copy=True))


register(CatalogueEntry(
    name="s001-elsa-identity", paper=REF_P3,
    summary="ELSA outputs its input H: a skip connection (Property 3; case m>n, m<n or m=n from the sizes)",
    build=elsa_identity, sizes={"m": 4, "n": 3},
    claim="one ELSA (one head), weights and biases of eq. (19)/(20), output = input, m x n"))


def elsa_product(r: int = 2, s: int = 3, t: int = 2, form: int = 1) -> FunctionConstruction:
    """Property 4: one ELSA layer with ``AB`` in its output, ``A`` (r x s), ``B`` (s x t).

    ``form=1``, eq. (21)-(25): ``H = [[A^T, B], [O_{r,r}, O_{r,t}]]`` ((s+r) x (r+t));
    ``W1, W2`` by Property 1 keep the block ``AB`` of ``H^T H`` (eq. (22)-(23)),
    ``W3 = O``, ``B3 = [[I_r, O], [O, O]]`` (eq. (24)), ``B1 = B2 = O``:
    ``ELSA(H) = [[O_{r,r}, AB], [O_{s,r}, O_{s,t}]]`` (eq. (25)).

    ``form=2``, eq. (26)-(30): ``H = [[A, O_{r,t}], [O_{s,s}, B]]`` ((r+s) x (s+t));
    ``W3, W2`` of eq. (27), ``W1 = O``, ``B1`` of eq. (29), ``B2 = B3 = O``:
    ``ELSA(H) = (H W3) B1^T (H W2) = [[O_{r,s}, AB], [O_{s,s}, O_{s,t}]]`` (eq. (30)).
    """
    if min(r, s, t) < 1:
        raise ValueError(f"need r, s, t >= 1, got r={r}, s={s}, t={t}")
    if form not in (1, 2):
        raise ValueError(f"form must be 1 (eq. (21)-(25)) or 2 (eq. (26)-(30)), got {form}")
    if form == 1:
        m, n = s + r, r + t
        W1, W2 = mask_move(n, range(r), range(r), range(r, r + t), range(r, r + t))   # eq. (23)
        B3 = _block(m, n, {(0, 0): _I(r)})                                           # eq. (24)
        layer = _elsa(W1, _Z(m, n), W2, _Z(m, n), _Z(n, n), B3)
        c0, ref = r, "eq. (21)-(25)"

        def embed(v):                                                                 # eq. (21)
            return _block(m, n, {(0, 0): ops.transpose(np.asarray(v["A"], dtype=object)), (0, r): v["B"]})
    else:
        m, n = r + s, s + t
        W3 = _block(n, n, {(0, t): _I(s)})                                           # eq. (27)
        W2 = _block(n, n, {(s, s): _I(t)})
        B1 = _block(m, n, {(r, t): _I(s)})                                           # eq. (29)
        layer = _elsa(_Z(n, n), B1, W2, _Z(m, n), W3, _Z(m, n))
        c0, ref = s, "eq. (26)-(30)"

        def embed(v):                                                                 # eq. (26)
            return _block(m, n, {(0, 0): v["A"], (r, s): v["B"]})

    lay = Layout((m, n), row_axis="rows of H", col_axis="columns of H")
    lay.add("O_left", (0, m), (0, c0), "output: zeros")
    lay.add("AB", (0, r), (c0, n), "output: the product AB")
    lay.add("O_bottom", (r, m), (c0, n), "output: zeros")

    def spec(v):
        AB = ops.mm(np.asarray(v["A"], dtype=object), np.asarray(v["B"], dtype=object))
        return _block(m, n, {(0, c0): AB})

    return FunctionConstruction(name="s001-elsa-product", reference=f"{REF_P4}; form {form}: {ref}", layout=lay,
                                prologue=[], body=[], epilogue=[layer], params={}, variables={"A": (r, s), "B": (s, t)},
                                notes=f"form {form}: {ref}", make_input=embed, make_final=spec)


register(CatalogueEntry(
    name="s001-elsa-product", paper=REF_P4,
    summary="ELSA computes AB from an input holding A^T and B (form=1) or A and B (form=2) (Property 4)",
    build=elsa_product, sizes={"r": 2, "s": 3, "t": 2, "form": 1},
    claim="one ELSA (one head); form 1: (s+r) x (r+t) input, form 2: (r+s) x (s+t) input"))


def lsa_product(r: int = 2, s: int = 3, t: int = 2) -> FunctionConstruction:
    """Eq. (10)-(15): one LSA layer (eq. (8), no skip connection) computes ``AB``.

    ``H = [[A, O_{r,t}, O_{r,s}], [O_{s,s}, B, I_s]]`` ((r+s) x (2s+t), eq. (10)).
    ``W1, W2`` by Property 1 move the block ``B`` of ``H^T H`` (rows of the
    ``I_s`` block, columns of the ``B`` block, eq. (11)) to rows ``1..s``,
    columns ``2s+1..2s+t`` (eq. (12)); ``W3 = diag(I_s, O)`` (eq. (13)-(14)):
    ``LSA(H) = [[O_{r,2s}, AB], [O_{s,2s}, O_{s,t}]]`` (eq. (15)).
    """
    if min(r, s, t) < 1:
        raise ValueError(f"need r, s, t >= 1, got r={r}, s={s}, t={t}")
    m, n = r + s, 2 * s + t
    W1, W2 = mask_move(n, range(s + t, n), range(s), range(s, s + t), range(2 * s, n))   # eq. (12)
    W3 = selector(n, range(s), range(s))                                                  # eq. (13)
    layer = LSA([LSAHead(W1, W2, W3)], residual=False)
    lay = Layout((m, n), row_axis="rows of H", col_axis="columns of H")
    lay.add("O_left", (0, m), (0, 2 * s), "output: zeros (input: A, O / O, B, I_s)")
    lay.add("AB", (0, r), (2 * s, n), "output: the product AB (input: O_{r,s})")
    lay.add("O_bottom", (r, m), (2 * s, n), "output: zeros (input: the extra identity I_s)")

    def embed(v):                                                                          # eq. (10)
        return _block(m, n, {(0, 0): v["A"], (r, s): v["B"], (r, s + t): _I(s)})

    def spec(v):                                                                           # eq. (15)
        AB = ops.mm(np.asarray(v["A"], dtype=object), np.asarray(v["B"], dtype=object))
        return _block(m, n, {(0, 2 * s): AB})

    return FunctionConstruction(name="s001-lsa-product", reference=REF_LSA, layout=lay, prologue=[], body=[],
                                epilogue=[layer], params={}, variables={"A": (r, s), "B": (s, t)},
                                notes="input (r+s) x (2s+t) with an extra identity block I_s",
                                make_input=embed, make_final=spec)


register(CatalogueEntry(
    name="s001-lsa-product", paper=REF_LSA,
    summary="LSA (no skip) computes AB from H = [[A, O, O], [O, B, I_s]] (eq. (10)-(15))",
    build=lsa_product, sizes={"r": 2, "s": 3, "t": 2},
    claim="one LSA layer (one head), state (r+s) x (2s+t) with an extra identity block"))
