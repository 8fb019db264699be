"""Benchmark numerics.reference.gd_reference against a naive mpmath.matrix loop.

Times, in one process:

* ``gd_reference`` (fast: precomputed M = I - eta A^T A, c = eta A^T b, batched
  object-array matvec in gmpy2) on the full batch;
* ``gd_reference_direct`` (literal update, gmpy2) on the full batch;
* a naive per-problem ``mpmath.matrix`` loop ``x = x - eta * A.T * (A x - b)`` at
  ``mp.dps = digits`` on a small subset of problems (``--naive-problems``), whose
  cost per (problem, step) is extrapolated to the full batch.

Also checks that the naive loop's float64 iterates equal the fast reference on
that subset.  Example::

    python bench/bench_reference.py --batch 256 --steps 100 --n 20 --d 5 --digits 50
"""

from __future__ import annotations

import os
import sys
import time

import mpmath
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from numerics.problems import optimal_step, sample_ls  # noqa: E402
from numerics.reference import gd_reference, gd_reference_direct  # noqa: E402
from polyverify.plumbing.cli import (Parser, UsageError, check_finite, check_memory, check_range,  # noqa: E402
                                     run_main)

try:
    from tqdm import tqdm
except ImportError:  # pragma: no cover - tqdm is a declared dependency
    def tqdm(it, **_kw):
        return it


def naive_mpmath(A, b, x0, eta, steps, digits, progress=True):
    """Per-problem mpmath.matrix GD loop; returns float64 iterates (steps+1, B, D)."""
    B, N, D = A.shape
    out = np.empty((steps + 1, B, D))
    with mpmath.workdps(digits):
        eta_mp = mpmath.mpf(eta)  # exact for a float
        for p in tqdm(range(B), desc="naive mpmath", disable=not progress, leave=False):
            Am = mpmath.matrix(A[p].tolist())  # mpf(float) is exact
            bm = mpmath.matrix(b[p].tolist())
            x = mpmath.matrix(x0[p].tolist())
            At = Am.T
            out[0, p] = [float(v) for v in x]
            for k in range(steps):
                x = x - eta_mp * (At * (Am * x - bm))
                out[k + 1, p] = [float(v) for v in x]
    return out


def _check(args) -> None:
    """Every argument in range (a UsageError naming the flag and the value) before any problem is sampled:
    the sizes within ``gd``'s own limits (``GD_LIMITS``; N >= D, as a least-squares problem needs), at least
    one step, repeat and naive problem, the digits a float64 comparison needs, kappa finite and >= 1, the step
    finite and > 0, the float64 iterates held within the memory limit."""
    from verify.gd_cmd import GD_LIMITS, GD_MIN_DIGITS

    check_range("--batch", args.batch, 1, GD_LIMITS["--batch"])
    check_range("--steps", args.steps, 1, GD_LIMITS["--layers"])
    check_range("--n", args.n, 1, GD_LIMITS["--n"])
    check_range("--d", args.d, 1, GD_LIMITS["--d"])
    if args.n < args.d:
        raise UsageError(f"--n ({args.n}) must be >= --d ({args.d}) for a least-squares problem")
    check_range("--batch x --steps", args.batch * args.steps, 1, GD_LIMITS["--batch x --layers (problem-layers)"])
    check_range("--digits", args.digits, GD_MIN_DIGITS, GD_LIMITS["--digits"])
    check_range("--kappa", args.kappa, 1.0)
    check_range("--seed", args.seed, 0, 2**63 - 1)
    if args.eta is not None:
        check_finite("--eta", args.eta, positive=True)
    check_range("--naive-problems", args.naive_problems, 1)
    check_range("--repeats", args.repeats, 1, 100)
    # the float64 iterates (steps + 1, B, D) of the fast and the direct reference
    check_memory(f"--batch {args.batch} x --steps {args.steps} x --d {args.d}",
                 2 * 8 * (args.steps + 1) * args.batch * args.d)


def _main(argv) -> int:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--d", type=int, default=5)
    ap.add_argument("--digits", type=int, default=50)
    ap.add_argument("--kappa", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eta", type=float, default=None, help="default 2/(kappa^2+1)")
    ap.add_argument("--naive-problems", type=int, default=4, help="subset size for the mpmath loop")
    ap.add_argument("--repeats", type=int, default=3, help="best-of repeats for gd_reference")
    ap.add_argument("--no-direct", action="store_true", help="skip timing gd_reference_direct")
    args = ap.parse_args(argv)
    _check(args)

    eta = optimal_step(args.kappa) if args.eta is None else args.eta
    P = sample_ls(args.batch, args.n, args.d, kappa=args.kappa, seed=args.seed)
    print(f"problems: B={args.batch} N={args.n} D={args.d} kappa={args.kappa} eta={eta!r} "
          f"steps={args.steps} digits={args.digits}")

    best = float("inf")
    for _ in range(max(1, args.repeats)):
        t0 = time.perf_counter()
        X = gd_reference(P.A, P.b, P.x0, eta, args.steps, digits=args.digits)
        best = min(best, time.perf_counter() - t0)
    ps = args.batch * args.steps
    print(f"gd_reference (fast)       : {best:8.3f} s total, {best / ps * 1e6:8.2f} us per problem-step "
          f"(best of {max(1, args.repeats)})")

    if not args.no_direct:
        t0 = time.perf_counter()
        Xd = gd_reference_direct(P.A, P.b, P.x0, eta, args.steps, digits=args.digits)
        t_direct = time.perf_counter() - t0
        print(f"gd_reference_direct       : {t_direct:8.3f} s total, {t_direct / ps * 1e6:8.2f} us per problem-step; "
              f"float64 outputs identical to fast: {np.array_equal(X, Xd)}")

    k = max(1, min(args.naive_problems, args.batch))
    t0 = time.perf_counter()
    Xn = naive_mpmath(P.A[:k], P.b[:k], P.x0[:k], eta, args.steps, args.digits)
    t_naive = time.perf_counter() - t0
    per = t_naive / (k * args.steps) if args.steps else float("nan")
    t_naive_full = per * ps
    print(f"naive mpmath.matrix loop  : {t_naive:8.3f} s on {k} problems, {per * 1e6:8.2f} us per problem-step, "
          f"extrapolated {t_naive_full:8.3f} s for {args.batch} x {args.steps}")
    print(f"naive float64 outputs identical to fast on the subset: {np.array_equal(Xn, X[:, :k])}")
    print(f"speed ratio naive / fast  : {t_naive_full / best:8.1f}x")
    return 0


def main(argv=None) -> int:
    """The command: a bad argument is one ``error:`` line and exit status 2, before any problem is sampled."""
    return run_main(_main, argv)


if __name__ == "__main__":
    raise SystemExit(main())
