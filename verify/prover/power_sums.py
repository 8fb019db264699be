"""A grouped ring with a handful of generators: slots written as their power sums.

Why.  The grouped substitution of ``verify/prover/token_groups.py`` (encoding 1) keeps one
generator per slot of the grouped variables and one per global variable: 2D + 3 for least
squares with a symbolic step size (259 at N = 512, D = 128).  FLINT stores every term's
exponent vector over all of them, so at the widths of seed 003's sweeps each term of the
specification's x' (N D^2 of them: 8.4 million at 512x128) costs hundreds of bytes, and the
proof ran out of memory.  Here a term costs a few words: the ring has ``hg + hx + 3`` generators
(plus the parameters), where ``hg`` and ``hx`` bound the degree of any monomial in the grouped
and in the global variables (2 and 2 for a GD step with its prediction: 8 generators with the
step size, at any N and D).

The lemma (power sums).  Number the grouped slots ``s = 0 .. n-1`` (every slot of every grouped
variable, e.g. ``A[g, 0..D-1]`` and ``b[g]``) and the global entries ``j = 0 .. m-1``.  Map

    grouped variable of group g at slot s  ->  gamma * tau^(g+1) * prod_{t=1..hg} beta_t^(s^t)
    global entry j                         ->  zeta * prod_{t=1..hx} xi_t^(j^t)

and every parameter to itself.  A monomial whose grouped variables all come from one group ``g``
(the arity-1 condition of the grouped substitution) with slot multiset ``S`` (``|S| = E``) and
global multiset ``G`` (``|G| = F``) goes to ``gamma^E tau^((g+1) E) prod_t beta_t^(p_t(S))
zeta^F prod_t xi_t^(p_t(G))`` times its parameters, ``p_t`` the ``t``-th power sum.  The image
gives back ``E`` and ``F``; if ``E <= hg``, the power sums ``p_1 .. p_E`` of ``S`` determine its
elementary symmetric polynomials (Newton's identities, over the rationals), hence the multiset
``S``; likewise ``G`` if ``F <= hx``; and ``g = exponent(tau) / E - 1`` when ``E > 0``.  So the
map is injective on the monomials with at most one group and degrees within ``(hg, hx)``: if
every monomial of ``F = layers - specification`` is such (the abstract evaluation of
:class:`verify.prover.token_groups.Support` bounds both, for every entry of both sides), distinct
monomials of ``F`` have distinct images, none can cancel, and ``phi(F) = 0`` if and only if
``F = 0``.  The degrees are never assumed: they are what the abstract evaluation of the same
layers and specification code found, and an entry without a bound rules this ring out.

Exponents: ``beta_t`` reaches ``hg (n-1)^t``; the encoding is used only while every such bound
stays below 2^62 (FLINT's packed single-word fields), else the proof keeps one generator per slot.
"""
from __future__ import annotations

import numpy as np

__all__ = ["PowerSumProblem", "power_sums_fit"]

#: the largest exponent the encoding may need (FLINT packs exponents below 2^63 in one word)
EXPONENT_CAP = 2 ** 62


def power_sums_fit(n: int, h: int) -> bool:
    """Whether ``h`` power sums of ``n`` slot numbers ``0 .. n-1`` stay below :data:`EXPONENT_CAP`."""
    return h * max(n - 1, 1) ** h < EXPONENT_CAP


class PowerSumProblem:
    """The power-sum generators (the module docstring) and the construction's variables in them.

    Same interface as :class:`verify.prover.token_groups.GroupedProblem` (``names``, ``ctx``,
    ``params``, ``v``, ``n_groups``, ``encoding``); ``degrees = (hg, hx)``: the degree bounds it is
    injective within.  Raises ValueError where the bounds do not fit (:func:`power_sums_fit`) or
    the generator names collide with a parameter's."""

    encoding = 1

    def __init__(self, variables: dict[str, tuple[int, ...]], params: tuple[str, ...],
                 groups: tuple[str, ...], entry_name, display, degrees: tuple[int, int]):
        import flint

        from .token_groups import grouped_shape

        self.n_groups = grouped_shape(variables, groups)
        hg, hx = (max(1, int(d)) for d in degrees)
        self.degrees = (hg, hx)
        self.slots = [(var, s) for var, shape in variables.items() if var in groups
                      for s in np.ndindex(*shape[1:])]
        self.globals = [(var, ix) for var, shape in variables.items() if var not in groups
                        for ix in np.ndindex(*shape)]
        if not power_sums_fit(len(self.slots), hg) or not power_sums_fit(len(self.globals), hx):
            raise ValueError(f"power sums of degree {hg}, {hx} over {len(self.slots)}, {len(self.globals)} "
                             f"slots exceed 2^62")
        names = ["gamma"] + [f"beta{t}" for t in range(1, hg + 1)] + ["tau"]
        if self.globals:
            names += ["zeta"] + [f"xi{t}" for t in range(1, hx + 1)]
        self._params_at = len(names)
        names += [display(p) for p in params]
        if len(set(names)) != len(names):
            raise ValueError("substituted generator names collide")
        self.names = names
        self.ctx = flint.fmpq_mpoly_ctx.get(tuple(names), "lex")
        gens = self.ctx.gens()
        self.params = {p: gens[self._params_at + i] for i, p in enumerate(params)}
        self._variables, self._groups, self._v = variables, groups, None

    def describe(self) -> str:
        hg, hx = self.degrees
        return (f"power sums of the {len(self.slots)} grouped slots (degree <= {hg} per monomial) and the "
                f"{len(self.globals)} global entries (degree <= {hx}); verify/prover/power_sums.py")

    @property
    def v(self) -> dict:
        """The construction's variables in this ring (object arrays of fmpq_mpoly monomials)."""
        if self._v is None:
            self._v = self._images()
        return self._v

    def _images(self) -> dict:
        hg, hx = self.degrees
        nv = len(self.names)
        tau = hg + 1
        slot_no = {key: i for i, key in enumerate(self.slots)}
        glob_no = {key: j for j, key in enumerate(self.globals)}

        def monomial(exps: dict[int, int]):
            e = [0] * nv
            for i, x in exps.items():
                e[i] = x
            return self.ctx.from_dict({tuple(e): 1})

        v = {}
        for var, shape in self._variables.items():
            arr = np.empty(shape, dtype=object)
            for ix in np.ndindex(*shape):
                if var in self._groups:
                    s = slot_no[(var, tuple(ix[1:]))]
                    exps = {0: 1, tau: int(ix[0]) + 1}
                    exps.update({t: s ** t for t in range(1, hg + 1)})
                else:
                    j = glob_no[(var, tuple(ix))]
                    exps = {tau + 1: 1}
                    exps.update({tau + 1 + t: j ** t for t in range(1, hx + 1)})
                arr[ix] = monomial(exps)
            v[var] = arr
        return v
