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
