"""Random valid circuits (for test data and circuit files).

CLI::

    python -m circuits.random --seed 0 --inputs 4 --gates 12 --out FILE.json

writes a node-link JSON file (see :mod:`circuits.io`); without ``--out`` the
JSON goes to stdout.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from fractions import Fraction

import networkx as nx
import numpy as np

from .graph import CircuitError, validate


def random_circuit(
    rng: np.random.Generator | int | None = 0,
    n_inputs: int = 3,
    n_gates: int = 8,
    *,
    max_arity: int = 3,
    const_prob: float = 0.2,
    n_outputs: int = 1,
    max_degree: int | None = 12,
) -> nx.DiGraph:
    """A random validated circuit with exactly ``n_gates`` add/mul gates.

    Inputs are named ``x0..x{n_inputs-1}``, outputs ``y0..y{n_outputs-1}``
    (``1 <= n_outputs <= n_gates``); node ids are ints.  Each gate draws an
    arity in ``[2, max_arity]``; each operand is, with probability
    ``const_prob``, a fresh const node with a small exact rational value
    (numerator in [-3, 3], denominator in [1, 3]), otherwise an earlier input
    or gate (a repeated pick becomes ``mult > 1``).  Gates are steered so that
    every gate ends up feeding an output (nothing is pruned); unused inputs are
    possible.  A ``mul`` whose formal degree would exceed ``max_degree`` is
    turned into an ``add`` (keeps expanded polynomials small).
    """
    if not isinstance(rng, np.random.Generator):
        rng = np.random.default_rng(rng)
    if n_inputs < 0 or n_gates < 1 or not 1 <= n_outputs <= n_gates or max_arity < 2:
        raise CircuitError(
            f"random_circuit: need n_inputs >= 0, n_gates >= 1, 1 <= n_outputs <= n_gates, max_arity >= 2 "
            f"(got {n_inputs}, {n_gates}, {n_outputs}, {max_arity})"
        )
    if not 0 <= const_prob <= 1:
        raise CircuitError(f"random_circuit: const_prob must be in [0, 1], got {const_prob}")
    g = nx.DiGraph()
    deg: dict[int, int] = {}
    for i in range(n_inputs):
        g.add_node(i, op="input", name=f"x{i}")
        deg[i] = 1
    gates: list[int] = []
    dangling: list[int] = []  # gates not yet used as an operand
    for i in range(n_gates):
        left = n_gates - i - 1
        # consume enough dangling gates that the rest can bring them down to n_outputs
        c_min = max(0, len(dangling) + 1 - n_outputs - left * (max_arity - 1))
        k = max(int(rng.integers(2, max_arity + 1)), c_min)
        c = max(c_min, min(len(dangling), int(rng.random() < 0.6)))
        picks = [dangling[j] for j in rng.choice(len(dangling), size=c, replace=False)] if c else []
        pool = list(range(n_inputs)) + gates
        for _ in range(k - c):
            if not pool or rng.random() < const_prob:
                n = g.number_of_nodes()
                value = Fraction(int(rng.integers(-3, 4)), int(rng.integers(1, 4)))
                g.add_node(n, op="const", value=value)
                deg[n] = 0
                picks.append(n)
            else:
                picks.append(pool[int(rng.integers(len(pool)))])
        ops = Counter(picks)
        op = "add" if rng.random() < 0.5 else "mul"
        mdeg = sum(m * deg[u] for u, m in ops.items())
        if op == "mul" and max_degree is not None and mdeg > max_degree:
            op = "add"
        v = g.number_of_nodes()
        g.add_node(v, op=op)
        deg[v] = mdeg if op == "mul" else max(deg[u] for u in ops)
        for u, m in ops.items():
            g.add_edge(u, v, mult=m)
        dangling = [d for d in dangling if d not in ops] + [v]
        gates.append(v)
    assert len(dangling) <= n_outputs
    rest = [x for x in gates if x not in dangling]
    extra = [rest[j] for j in rng.choice(len(rest), size=n_outputs - len(dangling), replace=False)] if rest else []
    for j, v in enumerate(sorted(dangling + extra)):
        g.nodes[v]["output"] = f"y{j}"
    return validate(g)


def main(argv=None) -> int:
    from .io import dump

    p = argparse.ArgumentParser(prog="python -m circuits.random", description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--inputs", type=int, default=3)
    p.add_argument("--gates", type=int, default=8)
    p.add_argument("--outputs", type=int, default=1)
    p.add_argument("--max-arity", type=int, default=3)
    p.add_argument("--const-prob", type=float, default=0.2)
    p.add_argument("--max-degree", type=int, default=12)
    p.add_argument("--out", default=None, help="output JSON file (default: stdout)")
    a = p.parse_args(argv)
    try:
        g = random_circuit(a.seed, a.inputs, a.gates, max_arity=a.max_arity, const_prob=a.const_prob,
                           n_outputs=a.outputs, max_degree=a.max_degree)
        data = dump(g, a.out)
    except CircuitError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.out is None:
        json.dump(data, sys.stdout, indent=1)
        sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
