"""Errata of seed 000 (App. D.2.1, D.2.3, D.3.1), each checked by the verifier.

Every ``as_printed_check`` builds the printed formula as faithfully as this
toolkit allows and must be *rejected* (with a counterexample); every
``corrected_check`` must be proved.

* ``S000-read-shift-up``  App. D.2.1 READ: the filter "u[k+i-j, :] - u[k, :]" is a
  shift *down* by j - i.  With the paper's convolution ``*`` (linear/acyclic,
  App. D.1: ``u * v = coeff(u(X) v(X) mod X^n)``, used in eq. (2)/(19)) that is
  only possible for i <= j; for i > j (App. B.3.2 samples i != j uniformly) no
  causal filter reaches row i from row j, so READ needs the cyclic
  convolution (a non-causal BaseConv).
* ``S000-newton-last-linear``  App. D.2.3: the last bullet sets
  ``flt(M_1) := 2flt(M_0) - flt((a^T a) M_0)``, but eq. (24) is
  ``M_1 = M_0 (2I - (a^T a) M_0) = 2 M_0 - M_0 (a^T a) M_0``: the left factor
  ``M_0`` is missing (one more MULTIPLY + LINEAR).
* ``S000-newton-gram-flat-product``  App. D.2.3: "we can represent the matrix
  multiplication a^T a as a linear combination of the entries of the
  element-wise multiplication flt(a^T) ⊙ flt(a)" is false for N, D >= 2: the
  N D entries are single monomials ``a[k mod N, k div N] a[k div D, k mod D]``
  and miss e.g. ``a[1,0]^2`` of ``(a^T a)[0,0]``.
* ``S000-causal-gd-layer1``  App. D.3.1 (causal BaseConv), Layer 1: the
  product row is printed "b_1 a_1 ... b_1 a_N"; gate ``b_i 1^D`` times conv
  ``a_i`` gives ``b_i a_i``.
* ``S000-causal-gd-layer2-sums``  App. D.3.1 (causal BaseConv), Layer 2: the
  all-ones causal filter is printed to give the full sums
  ``<- sum_{i=1}^N b_i a_i ->`` (and ``sum flt(a_i a_i^T)``) at every token; a
  causal convolution gives the prefix sums ``sum_{i<=k}`` at token k (the full
  sums at the last token only, which is all the GD layer reads).
"""
from __future__ import annotations

import numpy as np

from constructions.base import FunctionConstruction
from constructions.gd_baseconv import gd_baseconv_causal
from constructions.lsq import LS_VARIABLES

from . import Erratum, register_erratum
from .seed000_newton import gram_layer, newton
from .seed000_primitives import read

# --------------------------------------------------------------------------- D.2.1 READ

register_erratum(Erratum(
    id="S000-read-shift-up", paper="seed 000", location="App. D.2.1, READ (eq. (20)) with i > j",
    as_printed="Conv(W_in(u))[k, :] := u[k + i - j, :] - u[k, :], with the BaseConv convolution "
               "h * u of eq. (19), u * v = coeff(u(X) * v(X) mod X^n) (App. D.1, 'linear (or acyclic) "
               "convolution'), for any i != j (App. B.3.2: 'i != j in [N] are sampled uniformly')",
    correction="the shift by j - i is a causal filter only for i <= j; for i > j use the cyclic convolution "
               "(tap +1 at lag (j - i) mod N, i.e. a non-causal BaseConv); no causal layer can READ a later "
               "row into an earlier one",
    as_printed_check=lambda: read(4, 2, 3, 1, 0, 2, conv="causal"),
    corrected_check=lambda: read(4, 2, 3, 1, 0, 2, conv="circular")))

# --------------------------------------------------------------------------- D.2.3 Newton

register_erratum(Erratum(
    id="S000-newton-last-linear", paper="seed 000", location="App. D.2.3, last bullet (vs. eq. (24))",
    as_printed="flt(M_1) := 2flt(M_0) - flt((a^T a)M_0) can be obtained using LINEAR once more",
    correction="eq. (24): M_1 = M_0(2I - (a^T a)M_0) = 2M_0 - M_0 (a^T a) M_0, one more MULTIPLY + LINEAR "
               "(M_0 times (a^T a)M_0); s000-newton does it in one layer per iterate",
    as_printed_check=lambda: newton(3, 2, as_printed=True),
    corrected_check=lambda: newton(3, 2)))

register_erratum(Erratum(
    id="S000-newton-gram-flat-product", paper="seed 000", location="App. D.2.3, third bullet (flt(a^T a))",
    as_printed="we can represent the matrix multiplication a^T a as a linear combination of the entries of "
               "the element-wise multiplication flt(a^T) ⊙ flt(a). This means that we can obtain flt(a^T a) "
               "using a single application of MULTIPLY and LINEAR",
    correction="flt(a^T) ⊙ flt(a) has N D entries, each one monomial a[k mod N, k div N] a[k div D, k mod D]; "
               "(a^T a)[p, q] = sum_i a[i,p] a[i,q] needs all N D(D+1)/2 monomials a[i,p] a[i,q] (false for "
               "N, D >= 2). MULTIPLY the copies X[i,p,q] = a[i,p], Y[i,p,q] = a[i,q] (length N D^2), then "
               "LINEAR sums over i",
    as_printed_check=lambda: gram_layer(3, 2, as_printed=True),
    corrected_check=lambda: gram_layer(3, 2)))

# --------------------------------------------------------------------------- D.3.1 causal GD


def _layer1_output(gd, v, printed: bool):
    """Layer 1 of D.3.1 (causal): b_i a_i (printed: b_1 a_i) and flt(a_i a_i^T) at token i."""
    n, d = gd.variables["A"]
    lay = gd.layout
    S = gd.input_state(v)
    A, b = np.asarray(v["A"], dtype=object), np.asarray(v["b"], dtype=object)
    for i in range(n):
        bi = b[0] if printed else b[i]
        for j, c in enumerate(lay.cols("Sba")):
            S[i, c] = bi * A[i, j]  # scalar products: a ring element times an array is not elementwise
        for j, c in enumerate(lay.cols("Saa")):
            S[i, c] = A[i, j // d] * A[i, j % d]
    return S


def _layer2_output(gd, v, printed: bool):
    """Layer 2 of D.3.1 (causal): prefix sums (printed: the full sums at every token)."""
    if not printed:
        return gd.state(v)
    n, d = gd.variables["A"]
    lay = gd.layout
    S = gd.input_state(v)
    full = gd.state(v)[n]
    for t in range(n + 1):
        for r in ("Sba", "Saa"):
            S[t, slice(*lay[r].cols)] = full[slice(*lay[r].cols)]
    return S


def causal_gd_layer(layer: int, printed: bool, n: int = 3, d: int = 2) -> FunctionConstruction:
    """Layer 1 or 2 of seed 000's causal GD construction (``gd_baseconv_causal``'s
    prologue, which follows the paper's weights) against its printed or corrected output,
    both states functions of the least-squares variables."""
    gd = gd_baseconv_causal(n, d)
    if layer == 1:
        start, out = gd.input_state, (lambda v: _layer1_output(gd, v, printed))
    else:
        start, out = (lambda v: _layer1_output(gd, v, False)), (lambda v: _layer2_output(gd, v, printed))
    return FunctionConstruction(name=f"s000-causal-gd-layer{layer}" + ("-as-printed" if printed else ""),
                                reference="seed 000 App. D.3.1 (causal BaseConv)", layout=gd.layout, prologue=[],
                                body=[], epilogue=[gd.prologue[layer - 1]], params={}, variables=LS_VARIABLES(n, d),
                                make_input=start, make_final=out)


register_erratum(Erratum(
    id="S000-causal-gd-layer1", paper="seed 000", location="App. D.3.1, causal BaseConv, Layer 1 output",
    as_printed="b_1 a_1 ... b_1 a_N 0^D (the product of the gate row b_1 1^D ... b_N 1^D 0^D and the conv "
               "row a_1 ... a_N 0^D)",
    correction="b_1 a_1 ... b_N a_N 0^D",
    as_printed_check=lambda: causal_gd_layer(1, True),
    corrected_check=lambda: causal_gd_layer(1, False)))

register_erratum(Erratum(
    id="S000-causal-gd-layer2-sums", paper="seed 000", location="App. D.3.1, causal BaseConv, Layer 2 output",
    as_printed="<- sum_{i=1}^N b_i a_i -> and <- sum_{i=1}^N flt(a_i a_i^T) -> (the full sums at every token) "
               "from the causal all-ones convolution",
    correction="prefix sums: token k holds sum_{i<=k} b_i a_i and sum_{i<=k} flt(a_i a_i^T); the full sums "
               "only at the last token (the only token the GD layer reads, so the construction stands)",
    as_printed_check=lambda: causal_gd_layer(2, True),
    corrected_check=lambda: causal_gd_layer(2, False)))
