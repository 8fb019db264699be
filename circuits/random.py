"""Random valid circuits (for test data and circuit files).

CLI::

    python -m circuits.random --seed 0 --inputs 4 --gates 12 --out FILE.json

writes a node-link JSON file (see :mod:`circuits.io`; written atomically, the
path checked before any work) and prints one line saying what it wrote;
without ``--out`` the JSON goes to stdout.  Sizes are bounded by
:data:`LIMITS` (``--allow-large``: :data:`LARGE_LIMITS`); beyond them the
command refuses (exit 2, one line on stderr) before generating anything: among
them the most wires a run can draw (``--gates`` x ``--max-arity``, every gate
at its largest arity) and ``--inputs`` + ``--gates`` nodes, bounded by the
circuit command's own ``max_size`` and ``max_nodes`` (``verify.circuit_cmd``),
so the generation stays short and never writes a file ``python -m
verify.construct circuit`` would refuse at the same ``--allow-large`` setting.
The constants drawn are random: a circuit that came out with more nodes than
``max_nodes`` (only near the limit) is refused before it is written.
"""
from __future__ import annotations

import json
import sys
import warnings
from collections import Counter
from fractions import Fraction

import networkx as nx
import numpy as np

from . import keys as K
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

    Linear in the gates: the gates not yet used (each must come to feed an
    output) are drawn by index from a list with O(1) removal.  The distribution
    is the earlier quadratic version's, not its random stream: a seed gives a
    different circuit than the quadratic version gave.
    """
    if not isinstance(rng, np.random.Generator):
        rng = np.random.default_rng(rng)
    _check_random_args(n_inputs, n_gates, n_outputs, max_arity, const_prob)
    g = nx.DiGraph()
    deg: dict[int, int] = {}
    for i in range(n_inputs):
        g.add_node(i, **{K.OP: K.INPUT, K.NAME: f"x{i}"})
        deg[i] = 1
    gates: list[int] = []
    dangling = _Dangling()  # gates not yet used as an operand
    for i in range(n_gates):
        left = n_gates - i - 1
        # consume enough dangling gates that the rest can bring them down to n_outputs
        c_min = max(0, len(dangling) + 1 - n_outputs - left * (max_arity - 1))
        k = max(int(rng.integers(2, max_arity + 1)), c_min)
        c = max(c_min, min(len(dangling), int(rng.random() < 0.6)))
        picks = [dangling.draw(rng) for _ in range(c)]  # c distinct dangling gates, uniformly, in the order drawn
        picks += _pool_operands(rng, g, deg, gates, n_inputs, k - c, const_prob)
        v = _add_gate(rng, g, deg, Counter(picks), max_degree, dangling)
        dangling.add(v)
        gates.append(v)
    _mark_outputs(rng, g, gates, dangling.items, n_outputs)
    return validate(g, in_place=True)  # g is built here: checked in place, not copied


def local_circuit(tokens: int, channels: int = 2, gates_per: int = 16, seed: int = 0,
                  shared: bool = False) -> nx.DiGraph:
    """A placed circuit whose output ``y{t}`` reads only the inputs of tokens ``t-1, t, t+1``: a
    sequence model's per-token computation over a short window (a compiler test family: its width
    should not grow with ``tokens`` when the blocks share a shape, ``shared``).

    Token ``t``'s block is a chain of ``gates_per`` random two-input add/mul gates, each reading the
    previous gate and one earlier value of its window (degree at most 6); inputs ``x{t}_{c}`` at
    ``(t, c)``; outputs ``y{t}`` unplaced.  ``shared``: every block draws the same random choices
    (the same shape, up to the two edge tokens whose windows are shorter)."""
    for name, v, lo in (("tokens", tokens, 2), ("channels", channels, 1), ("gates_per", gates_per, 1)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise CircuitError(f"local_circuit: {name} must be an integer >= {lo}, got {v!r}")
    if tokens * gates_per > LARGE_LIMITS["max_gates"] or tokens * channels > LARGE_LIMITS["max_inputs"]:
        raise CircuitError(f"local_circuit: {tokens} tokens x {gates_per} gates and {channels} inputs per token: more "
                           f"than {LARGE_LIMITS['max_gates']} gates or {LARGE_LIMITS['max_inputs']} inputs")
    rng = np.random.default_rng(seed)
    g = nx.DiGraph()
    for t in range(tokens):
        for c in range(channels):
            g.add_node(f"x{t}_{c}", **{K.OP: K.INPUT, K.NAME: f"x{t}_{c}", K.TOKEN: t, K.CHANNEL: c})
    for t in range(tokens):
        if shared:
            rng = np.random.default_rng(seed)
        pool = [f"x{s}_{c}" for s in range(max(0, t - 1), min(tokens, t + 2)) for c in range(channels)]
        deg = dict.fromkeys(pool, 1)
        for j in range(gates_per):
            a = pool[-1] if j else pool[rng.integers(len(pool))]
            b = pool[rng.integers(len(pool) - 1)]
            if a == b:
                b = pool[0] if a != pool[0] else pool[1]
            op = K.MUL if rng.random() < 0.4 and deg[a] + deg[b] <= 6 else K.ADD
            v = f"g{t}_{j}"
            g.add_node(v, **{K.OP: op})
            g.add_edge(a, v)
            g.add_edge(b, v)
            deg[v] = deg[a] + deg[b] if op == K.MUL else max(deg[a], deg[b])
            pool.append(v)
        g.nodes[pool[-1]][K.OUTPUT] = f"y{t}"
    g.graph["tokens"], g.graph["channels"] = tokens, channels
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a block's unread inputs are pruned
        return validate(g)


def _check_random_args(n_inputs: int, n_gates: int, n_outputs: int, max_arity: int, const_prob: float) -> None:
    """Raise ``CircuitError`` on sizes or a constant probability ``random_circuit`` cannot honour."""
    if n_inputs < 0 or n_gates < 1 or not 1 <= n_outputs <= n_gates or max_arity < 2:
        raise CircuitError(
            f"random_circuit: need n_inputs >= 0, n_gates >= 1, 1 <= n_outputs <= n_gates, max_arity >= 2 "
            f"(got {n_inputs}, {n_gates}, {n_outputs}, {max_arity})"
        )
    if not 0 <= const_prob <= 1:
        raise CircuitError(f"random_circuit: const_prob must be in [0, 1], got {const_prob}")


class _Dangling:
    """The gates not yet used as an operand: a list with each gate's index in it, so that drawing one
    and removing one are O(1) (swap with the last, pop): linear in the gates."""

    def __init__(self) -> None:
        self.items: list[int] = []
        self.where: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self.items)

    def __contains__(self, d: int) -> bool:
        return d in self.where

    def add(self, v: int) -> None:
        self.where[v] = len(self.items)
        self.items.append(v)

    def drop(self, d: int) -> None:
        j = self.where.pop(d)
        last = self.items.pop()
        if last != d:
            self.items[j], self.where[last] = last, j

    def draw(self, rng: np.random.Generator) -> int:
        """One dangling gate, uniformly, removed."""
        d = self.items[int(rng.integers(len(self.items)))]
        self.drop(d)
        return d


def _pool_operands(rng: np.random.Generator, g: nx.DiGraph, deg: dict[int, int], gates: list[int],
                   n_inputs: int, count: int, const_prob: float) -> list[int]:
    """``count`` operands: each a fresh small const (probability ``const_prob``, or always with an
    empty pool), else an input or earlier gate uniformly."""
    picks = []
    pool = n_inputs + len(gates)  # operands 0..n_inputs-1 are the inputs, then the gates (not copied)
    for _ in range(count):
        if not pool or rng.random() < const_prob:
            n = g.number_of_nodes()
            value = Fraction(int(rng.integers(-3, 4)), int(rng.integers(1, 4)))
            g.add_node(n, **{K.OP: K.CONST, K.VALUE: value})
            deg[n] = 0
            picks.append(n)
        else:
            j = int(rng.integers(pool))
            picks.append(j if j < n_inputs else gates[j - n_inputs])
    return picks


def _add_gate(rng: np.random.Generator, g: nx.DiGraph, deg: dict[int, int], ops: Counter,
              max_degree: int | None, dangling: _Dangling) -> int:
    """A new add or mul gate (a mul over ``max_degree`` becomes an add) over ``ops``; the operands
    drawn from the pool that were still dangling stop dangling."""
    op = K.ADD if rng.random() < 0.5 else K.MUL
    mdeg = sum(m * deg[u] for u, m in ops.items())
    if op == K.MUL and max_degree is not None and mdeg > max_degree:
        op = K.ADD
    v = g.number_of_nodes()
    g.add_node(v, **{K.OP: op})
    deg[v] = mdeg if op == K.MUL else max(deg[u] for u in ops)
    for u, m in ops.items():
        g.add_edge(u, v, **{K.MULT: m})
        if u in dangling:  # an earlier gate drawn from the pool that was still dangling
            dangling.drop(u)
    return v


def _mark_outputs(rng: np.random.Generator, g: nx.DiGraph, gates: list[int], dangling: list[int],
                  n_outputs: int) -> None:
    """Name the outputs ``y0..``: every dangling gate, then other gates drawn to make ``n_outputs``."""
    assert len(dangling) <= n_outputs
    out_set = set(dangling)
    rest = [x for x in gates if x not in out_set]
    extra = [rest[j] for j in rng.choice(len(rest), size=n_outputs - len(dangling), replace=False)] if rest else []
    for j, v in enumerate(sorted(dangling + extra)):
        g.nodes[v][K.OUTPUT] = f"y{j}"


#: the limits of ``python -m circuits.random`` (generation is linear in the gates);
#: ``max_wires`` (--gates x --max-arity) and ``max_nodes`` are the circuit command's ``max_size``
#: and ``max_nodes`` (tests/adversarial/test_circuit_cli.py checks that they agree)
LIMITS = {"max_gates": 10_000, "max_inputs": 10_000, "max_arity": 1_024, "max_wires": 50_000,
          "max_nodes": 20_000}
#: the limits with ``--allow-large``
LARGE_LIMITS = {"max_gates": 1_000_000, "max_inputs": 100_000, "max_arity": 16_384, "max_wires": 10_000_000,
                "max_nodes": 2_000_000}


def _limits_text() -> str:
    return ", ".join(f"{k} {LIMITS[k]} ({LARGE_LIMITS[k]} with --allow-large)" for k in LIMITS)


def build_parser():
    from polyverify.plumbing.cli import Parser

    from .limits import MAX_SEED

    p = Parser(prog="python -m circuits.random", description=__doc__.splitlines()[0],
               epilog=f"Limits: {_limits_text()}. Exit status: 0 written, 2 bad input (one line on stderr).")
    p.add_argument("--seed", type=int, default=0,
                   help=f"random seed, an integer in 0..2^{MAX_SEED.bit_length()}-1 (default 0)")
    p.add_argument("--inputs", type=int, default=3, help="number of input variables x0, x1, ... (default 3)")
    p.add_argument("--gates", type=int, default=8, help="number of add/mul gates, >= 1 (default 8)")
    p.add_argument("--outputs", type=int, default=1, help="number of outputs y0, y1, ..., 1..GATES (default 1)")
    p.add_argument("--max-arity", type=int, default=3,
                   help="largest number of operands a gate draws, >= 2 (default 3)")
    p.add_argument("--const-prob", type=float, default=0.2,
                   help="probability that an operand is a fresh rational constant, in [0, 1] (default 0.2)")
    p.add_argument("--max-degree", type=int, default=12,
                   help="a mul gate whose formal degree would exceed this becomes an add, >= 0 (default 12)")
    p.add_argument("--out", default=None, help="output JSON file (default: the JSON on stdout)")
    p.add_argument("--allow-large", action="store_true",
                   help="raise the size limits to " + ", ".join(f"{k} {v}" for k, v in LARGE_LIMITS.items()))
    return p


def _main(argv) -> int:
    from polyverify.plumbing.cli import UsageError, check_range, output_file

    from .limits import MAX_SEED

    from .io import dump

    a = build_parser().parse_args(argv)
    lim = LARGE_LIMITS if a.allow_large else LIMITS
    more = None if a.allow_large else "--allow-large"
    check_range("--seed", a.seed, 0, MAX_SEED)  # an int64, as every command's seed
    check_range("--inputs", a.inputs, 0, lim["max_inputs"], override=more)
    check_range("--gates", a.gates, 1, lim["max_gates"], override=more)
    check_range("--max-arity", a.max_arity, 2, lim["max_arity"], override=more)
    check_range("--const-prob", a.const_prob, 0.0, 1.0)
    check_range("--max-degree", a.max_degree, 0)
    over = f" (pass {more} to allow up to {{}})" if more else ""
    wires = a.gates * a.max_arity  # each gate draws at most --max-arity operands
    if wires > lim["max_wires"]:
        raise UsageError(f"--gates {a.gates} x --max-arity {a.max_arity} = {wires} wires at most, which exceeds "
                         f"the limit max_wires = {lim['max_wires']} (the circuit command's max_size)"
                         + over.format(LARGE_LIMITS["max_wires"]))
    if a.inputs + a.gates > lim["max_nodes"]:
        raise UsageError(f"--inputs {a.inputs} + --gates {a.gates} = {a.inputs + a.gates} nodes, which exceeds the "
                         f"limit max_nodes = {lim['max_nodes']} (the circuit command's)"
                         + over.format(LARGE_LIMITS["max_nodes"]))
    out = output_file("--out", a.out)
    try:
        g = random_circuit(a.seed, a.inputs, a.gates, max_arity=a.max_arity, const_prob=a.const_prob,
                           n_outputs=a.outputs, max_degree=a.max_degree)
        if g.number_of_nodes() > lim["max_nodes"]:
            raise UsageError(f"the circuit drawn has {g.number_of_nodes()} nodes ({a.inputs} inputs, {a.gates} gates, "
                             f"{g.number_of_nodes() - a.inputs - a.gates} constants), which exceeds the limit "
                             f"max_nodes = {lim['max_nodes']} of the circuit command; lower --gates, --max-arity or "
                             f"--const-prob" + (f", or pass {more}" if more else ""))
        data = dump(g, out)
    except CircuitError as e:
        raise UsageError(str(e)) from None
    if out is None:
        sys.stdout.write(json.dumps(data, indent=1) + "\n")  # one write: no half document from a slow dump
    else:
        print(f"wrote a circuit with {g.number_of_nodes()} nodes ({a.gates} gates), {a.inputs} inputs, "
              f"{a.outputs} output{'s' if a.outputs != 1 else ''} to {out}")
    return 0


def main(argv=None) -> int:
    from polyverify.plumbing.cli import run_main

    return run_main(_main, argv)


if __name__ == "__main__":
    from polyverify.plumbing.cli import exit_with

    exit_with(main)
