"""Quick start from Python (README "Quick start from Python"; run by tests/docs/test_quickstart.py).

A placed circuit, compiled to every target, proved, run in float32 against the exact values,
exported (this toolkit's format and a peer's) and loaded as a torch module.  Writes out/ under
the working folder.
"""
from fractions import Fraction

import numpy as np
import torch

import circuits as C
from constructions.base import to_float_array
from constructions.compiler import TARGETS, compile_circuit
from polyverify.torch import load_module
from verify.export import export
from verify.prover.proof import prove

b = C.CircuitBuilder()  # y = a0 b0 + a1 b1 on a 2-token x 2-channel grid: token i holds (a_i, b_i)
a = [(b.input(f"a{i}", token=i, channel=0), b.input(f"b{i}", token=i, channel=1)) for i in range(2)]
b.output(b.add(*(b.mul(ai, bi) for ai, bi in a)), "y", token=1, channel=1)
g = b.graph()
v = {n: np.random.default_rng(i).standard_normal(1000).astype(np.float32) for i, n in enumerate(C.inputs(g))}
exact = C.evaluate(g, {n: np.array([Fraction(float(x)) for x in z], dtype=object) for n, z in v.items()})["y"]
err = lambda y: float(max(abs(Fraction(float(t)) - e) for t, e in zip(y, exact)))  # noqa: E731
stacks = {t: compile_circuit(g, name="dot", target=t) for t in TARGETS}  # baseconv, ..., lsa, elsa
for t, con in stacks.items():
    proof = prove(con)  # exact: the stack's output polynomial is the circuit's, symbolically
    S, _ = con.run(v, 0, cast=lambda L: L.map(lambda w: to_float_array(w, np.float32)))  # in float32
    print(f"{t}: {len(con.layers(0))} layers, {'PROVED' if proof.ok else 'FAILED'}, "
          f"float32 max error {err(con.readout(S)['y']):.1e}")
export("out/dot-mlp.pt", stacks["baseconv-mlp"], "precision-ls")  # precision-ls's own state_dict + config
ex = export("out/dot.safetensors", stacks["baseconv"])  # this toolkit's format: float64 + exact rationals
m = load_module(ex.path)  # a torch.nn.Module on (batch, tokens, channels) states, trainable parameters
S = torch.as_tensor(stacks["baseconv"].input_state({n: z.astype(np.float64) for n, z in v.items()}))
print(f"torch: {sum(p.numel() for p in m.parameters())} parameters, "
      f"max error {err(stacks['baseconv'].readout(m(S))['y'].detach()):.1e}")
