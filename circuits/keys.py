"""The names of the circuit IR's attributes and operations, in one place (the contract is in
:mod:`circuits`' docstring; seed 000 Def. D.15).  Import as ``from circuits import keys as K`` and
write ``d[K.OP] == K.MUL``, ``g.edges[u, v].get(K.MULT, 1)``.

Every layer above (``constructions/compiler``, ``verify``) reads node attributes through these
names, so an attribute is renamed here or nowhere.
"""
from __future__ import annotations

# --- node attributes
OP = "op"  #: required: one of OPS
NAME = "name"  #: an input's name (required on input nodes)
VALUE = "value"  #: a const node's exact value
OUTPUT = "output"  #: an output's name (optional on any node)
TOKEN = "token"  #: an input's place (token, channel); on an output gate: where its value must end
CHANNEL = "channel"
OUTPUT_TOKEN = "output_token"  #: a pass-through output's place, on an input node that is also an output
OUTPUT_CHANNEL = "output_channel"

# --- values of OP
INPUT = "input"
CONST = "const"
ADD = "add"
MUL = "mul"
OPS = (INPUT, CONST, ADD, MUL)
GATES = (ADD, MUL)

# --- edge attributes
MULT = "mult"  #: the operand is used that many times (int >= 1, default 1)

# --- graph attributes (a placed circuit's grid)
TOKENS = "tokens"
CHANNELS = "channels"

#: the place attributes of a node, and the grid attributes of a graph
PLACE_ATTRS = (TOKEN, CHANNEL, OUTPUT_TOKEN, OUTPUT_CHANNEL)
GRID_ATTRS = (TOKENS, CHANNELS)

__all__ = ["OP", "NAME", "VALUE", "OUTPUT", "TOKEN", "CHANNEL", "OUTPUT_TOKEN", "OUTPUT_CHANNEL", "INPUT", "CONST",
           "ADD", "MUL", "OPS", "GATES", "MULT", "TOKENS", "CHANNELS", "PLACE_ATTRS", "GRID_ATTRS"]
