"""The size limits a circuit can be checked against (``circuits.metrics.check_limits``), named
and documented in one light module: the CLIs print them in their --help without importing
networkx (``circuits`` loads its names on first use)."""

#: limit key -> what it bounds (a missing key or None in a limits mapping: no limit)
LIMIT_DOC = {
    "max_nodes": "nodes (inputs, constants and gates)",
    "max_size": "size: wires counted with their mult",
    "max_fan_in": "operands of one gate, counted with mult",
    "max_mult": "mult of one wire",
    "max_degree": "formal degree of a node",
    "max_grid": "tokens x channels of a placed circuit's grid",
}

#: the largest ``--seed`` the commands take (``circuits.random``, ``verify.construct gd`` / ``circuit``):
#: numpy's ``default_rng`` takes any integer >= 0, but a seed is an int64 everywhere else (JSON
#: reports, the sweep tables, torch's generator), so a larger one is refused in one line
MAX_SEED = 2**63 - 1

#: what :func:`constructions.compiler.compile_circuit` takes at most, from Python as from the command
#: line (the circuit command's limits with --allow-large are these, not more): the compile writes a
#: wire of multiplicity m as m operand slots (a product's factors), so its time grows with m (x^m in
#: one wire: m = 16,384 takes 0.1 s, m = 10^6 took 30 s), and the degree it implies with it; the
#: size (every wire counted with its mult) bounds the whole compile.  No construction of the toolkit
#: needs more: its builders write a power as repeated squaring (mult <= 2)
COMPILE_LIMITS = {"max_mult": 16_384, "max_fan_in": 16_384, "max_size": 10_000_000}
