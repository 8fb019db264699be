"""Stated bounds as structured formulas in the compiled circuit's measures (issue 43 item 4).

Every target reports ``compiled.bound`` (its guarantee); its ``formulas`` entry states the layer and
width guarantees as objects ``{"formula", "measures", "value"}``: the formula's text, the measures it
reads (each a number computed from the circuit compiled and the compile's options, never from the
compiled stack), and its value.  :func:`measures` computes the measures of the linearised circuit
(:mod:`.linearise`), so two circuits with equal measures get equal bounds, whatever their compiles.

Seed 003 Thm. H.21 is the paper's statement and is kept apart from these (``theorem_H21_bound``,
:func:`.circuit.theorem_h21`): it states orders, no constants.
"""
from __future__ import annotations

import circuits as C

from .linearise import CONST, last_uses, linearise, needed


def formula(text: str, measures: dict, value: int) -> dict:
    """A stated bound: ``text`` over ``measures`` (name -> int), and its ``value``."""
    return {"formula": text, "measures": {k: int(v) for k, v in measures.items()}, "value": int(value)}


def _terms(f: dict) -> int:
    return len([x for x in f if x != CONST])


def measures(g) -> dict:
    """The measures of a validated circuit the compilers' bounds read (its linearisation's):

    * ``T`` tokens, ``D`` channels of the placed grid (inputs' and outputs' places; one token holding
      every input where the circuit is not placed);
    * ``I`` inputs and ``P`` products the outputs need, ``A = I + P`` atoms, ``md`` the multiplicative
      depth, ``m`` the most products of one level;
    * ``F`` terms of every needed product's two factor forms, ``O`` terms of the outputs' forms,
      ``n_out`` outputs;
    * ``K`` the most atoms carried into a level: over levels ``l``, the atoms of level below ``l`` read
      at level ``l`` or later (an output reads at level ``md + 1``), plus twice the level's products
      (its factor pairs): ``max_l (carried_l + 2 m_l)``."""
    pl = C.placement(g)
    if pl is None:
        T, D = 1, max(1, len(C.inputs(g)))
    else:
        T = pl.tokens
        D = max([pl.channels] + [c + 1 for _, c in pl.inputs.values()]
                + [p[1] + 1 for p in pl.outputs.values() if p is not None])
    atoms, level, outputs = linearise(g)
    need = needed(atoms, outputs)
    prods = [a for a in need if atoms[a][0] == "mul"]
    md = max([0] + [level[a] for a in need])
    last = last_uses(atoms, level, need, outputs, md + 1)
    per: dict[int, int] = {}
    for a in prods:
        per[level[a]] = per.get(level[a], 0) + 1
    K = 0
    for lv in range(1, md + 1):
        carried = sum(1 for a in need if level.get(a, 0) < lv and last.get(a, 0) >= lv)
        K = max(K, carried + 2 * per.get(lv, 0))
    I = len(need) - len(prods)  # noqa: E741
    return {"T": T, "D": D, "I": I, "P": len(prods), "A": len(need), "md": md, "m": max(per.values(), default=0),
            "F": sum(_terms(f) for a in prods for f in atoms[a][1:]), "O": sum(_terms(f) for f in outputs.values()),
            "n_out": len(outputs), "K": K}


def sequence_width(g, min_width: int = 1) -> dict:
    """The levelled compile's width guarantee (:mod:`.sequence`): a state's channels are the grid's
    ``D``, at most ``I`` more where inputs read across tokens are split to fresh channels
    (:mod:`.place`), then allocated lowest-free: at a level at most the atoms carried plus two per
    product (``K``), and one per output; a product layer's inner channels are at most its carried
    atoms plus its products (``<= A``), a route layer's at most the atoms it carries plus the terms of
    the forms it writes (``F`` or ``O``)."""
    ms = measures(g)
    S = ms["D"] + ms["I"] + ms["K"] + ms["n_out"]
    value = max(min_width, S, ms["A"] + max(ms["F"], ms["O"]))
    keys = ("D", "I", "K", "n_out", "A", "F", "O")
    return formula("max(min_width, D + I + K + n_out, A + max(F, O))",
                   {**{k: ms[k] for k in keys}, "min_width": min_width}, value)


def attention_width(g, elsa: bool, heads_limit: bool, min_width: int = 1) -> dict:
    """The LSA / ELSA compile's width guarantee (:mod:`.attention_emit`): the grid's ``D`` channels,
    ``I`` gathered inputs, ``F + O`` consumer-form terms (as many again as temporaries under a head
    limit), at least the outputs (ELSA: and the ``T`` tokens, Property 3's skip), LSA's ``T``
    positions after them."""
    ms = measures(g)
    data = ms["D"] + ms["I"] + ms["F"] + ms["O"]
    temps = data if heads_limit else 0
    core = max(min_width, data + temps, ms["n_out"], ms["T"] if elsa else 0)
    value = core + (0 if elsa else ms["T"])
    text = ("max(min_width, " + ("2 (D + I + F + O)" if heads_limit else "D + I + F + O") + ", n_out"
            + (", T)" if elsa else ") + T"))
    return formula(text, {"D": ms["D"], "I": ms["I"], "F": ms["F"], "O": ms["O"], "n_out": ms["n_out"],
                          "T": ms["T"], "min_width": min_width}, value)


def budget_width(channels: int) -> dict:
    """A budget compile's width guarantee: the channel budget ``C`` itself (an argument, not a result)."""
    return formula("C", {"C": channels}, channels)
