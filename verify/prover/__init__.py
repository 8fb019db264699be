"""The prover: exact proofs of layer stacks and identities, and the randomized checks beside them.

================  ==========================================================================
module            what it does
================  ==========================================================================
``proof``         the exact proof (``prove`` for layer stacks, ``prove_identity``, ``check``
                  for any registry item) in sympy's or FLINT's polynomial ring; the failure
                  report (section, layer, entry, residual, counterexample)
``flint_backend`` the proof's layer arithmetic in python-flint's ``fmpq_mpoly`` (C, exact)
``token_groups``  the grouped substitution: a smaller exact ring where every monomial draws
                  from one token group (injective there, checked abstractly first)
``modular``       exact trials modulo a prime, all trials at once (the circuit command)
``modp``          ``Layer.forward`` on residues (``Residues``): the one definition of each
                  layer's math, run modulo p
``randomized``    ``--check random``: a Schwartz-Zippel identity test modulo a 61-bit prime,
                  labelled as such (never PROVED)
``randomized_bounds`` the randomized check's scalars and entry bounds per layer kind
================  ==========================================================================

The commands (``verify/construct.py``, ``verify/gd_cmd.py``, ``verify/circuit_cmd.py``) and the
document generators (``verify/*_report.py``, ``verify/errata.py``) use it; it imports neither.
"""
