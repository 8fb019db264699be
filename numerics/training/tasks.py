"""Training tasks and their data generators (seed 000 App. B.3, B.4).

A task samples ``(u, y)``: inputs ``u`` (B, T, d_in) and targets ``y``
(B, R, d_out) for the output rows ``out_rows`` of the model's (B, T, d_out)
output; the loss is the MSE over those rows.  All randomness comes from a
``numpy.random.Generator`` passed in (the trainer derives one per step from
the run's seed, so a resumed run sees the same data).

Least-squares tasks (N data tokens + 1 query token, T = N + 1).  Token
features, in named channel blocks (the construction layouts keep a, b and x
apart in the same way; seed 000 B.3.3 stacks x0 under the a_i, which a
per-token linear embedding cannot separate from the a_i)::

    token i < N : [a_i (D) | b_i (1) | 0   (D) | 0]
    query token : [0   (D) | 0   (1) | x_0 (D) | 1]

* ``gradient``  (B.3.3, eq. (5)): target at the query token is
  grad L(x_0) = (1/N) A^T (A x_0 - b)  (seed 000 eq. (46)).
* ``iterate``   (B.3.4, eq. (4)/(13)): target x_k after k steps
  x_{i+1} = x_i - eta grad L(x_i)  (same gradient; default eta the optimal
  constant step 2N / (kappa^2 + 1), 20/13 for N = 20, kappa = 5).
* ``icls``      (B.3.1): in-context least squares, no x channels; target
  the least-squares solution x (here b = A x exactly up to rounding, so the
  solution is x_true; computed with lstsq for safety).

``A`` comes from :func:`numerics.problems.sample_ls` (entries N(0,1), singular
values rescaled onto [1, kappa]); x_true ~ N(0, sigma^2); x_0 ~ N(0, 1).

Primitives (B.3.2, B.4; D = 20, N = 40 by default), inputs with i.i.d.
N(0,1) entries:

* ``read``     copy row i to row j (all other rows unchanged), output all rows;
* ``linear``   y_k = x_k^T h, output (N, 1);
* ``multiply`` y_k = x_k[:D/2] * x_k[D/2:], output (N, D/2).

The paper draws READ's (i, j) and LINEAR's h "at each iteration" without
saying how the model sees them; here they are task parameters drawn once
from ``param_seed`` (i != j uniform, h ~ N(0, 3 I)), i.e. the primitives
READ(i, j) and LINEAR(h) of seed 000 Sec. 3.3 as fixed maps to learn.
"""
from __future__ import annotations

import abc

from dataclasses import dataclass, field

import numpy as np

from numerics.problems import sample_ls

from .names import TASKS  # noqa: E402 (importable without torch)


def _seed_from(rng: np.random.Generator) -> int:
    return int(rng.integers(0, 2**63 - 1))


@dataclass
class Task(abc.ABC):
    name: str
    T: int
    d_in: int
    d_out: int
    out_rows: slice

    @abc.abstractmethod
    def sample(self, batch: int, rng: np.random.Generator):
        """A batch of (inputs, targets) for this task."""

    def describe(self) -> dict:
        return {"name": self.name, "T": self.T, "d_in": self.d_in, "d_out": self.d_out,
                "out_rows": [self.out_rows.start, self.out_rows.stop]}


# --------------------------------------------------------------------------- least squares

@dataclass
class LSTask(Task):
    n: int = 20
    d: int = 5
    kappa: float = 5.0
    sigma: float = 1.0
    k: int = 1
    eta: float | None = None
    target: str = "gradient"  # gradient | iterate | icls

    def __post_init__(self):
        if self.eta is None:
            self.eta = 2.0 * self.n / (self.kappa ** 2 + 1.0)

    def problems(self, batch: int, rng: np.random.Generator, *, sigma: float | None = None):
        """(A, b, x_true, x0) float64 arrays; x0 ~ N(0, I)."""
        P = sample_ls(batch, self.n, self.d, kappa=self.kappa, sigma=self.sigma if sigma is None else sigma,
                      seed=_seed_from(rng), x0="gaussian")
        return P.A, P.b, P.x_true, P.x0

    def embed(self, A, b, x0=None):
        """The (B, N+1, d_in) input of the module docstring."""
        B, n, d = A.shape
        u = np.zeros((B, n + 1, self.d_in))
        u[:, :n, :d] = A
        u[:, :n, d] = b
        if self.target == "icls":
            u[:, n, d + 1] = 1.0
        else:
            u[:, n, d + 1:2 * d + 1] = x0
            u[:, n, 2 * d + 1] = 1.0
        return u

    def grad(self, A, b, x):
        """(1/N) A^T (A x - b), batched (seed 000 eq. (46))."""
        r = np.einsum("bnd,bd->bn", A, x) - b
        return np.einsum("bnd,bn->bd", A, r) / A.shape[1]

    def gd(self, A, b, x, k):
        for _ in range(k):
            x = x - self.eta * self.grad(A, b, x)
        return x

    def target_of(self, A, b, x_true, x0):
        if self.target == "gradient":
            return self.grad(A, b, x0)
        if self.target == "iterate":
            return self.gd(A, b, x0, self.k)
        return np.linalg.lstsq(A, b[..., None], rcond=None)[0][..., 0] if A.shape[0] == 1 else \
            np.stack([np.linalg.lstsq(A[i], b[i], rcond=None)[0] for i in range(A.shape[0])])

    def sample(self, batch, rng, *, sigma=None):
        A, b, xt, x0 = self.problems(batch, rng, sigma=sigma)
        if self.target == "icls":
            y = xt.copy()  # b = A x_true (rounded): x_true is the solution to ~1 ulp
        else:
            y = self.target_of(A, b, xt, x0)
        return self.embed(A, b, x0), y[:, None, :]


def ls_task(target: str, n: int = 20, d: int = 5, *, kappa: float = 5.0, sigma: float = 1.0,
            k: int = 1, eta: float | None = None) -> LSTask:
    d_in = d + 2 if target == "icls" else 2 * d + 2
    return LSTask(name=target if target != "iterate" else f"iterate{k}", T=n + 1, d_in=d_in, d_out=d,
                  out_rows=slice(n, n + 1), n=n, d=d, kappa=kappa, sigma=sigma, k=k, eta=eta, target=target)


# --------------------------------------------------------------------------- primitives

@dataclass
class PrimitiveTask(Task):
    n: int = 40
    d: int = 20
    op: str = "multiply"
    i: int = 0
    j: int = 1
    h: np.ndarray | None = field(default=None, repr=False)

    def sample(self, batch, rng):
        x = rng.standard_normal((batch, self.n, self.d))
        if self.op == "read":
            y = x.copy()
            y[:, self.j] = x[:, self.i]
        elif self.op == "linear":
            y = (x @ self.h)[..., None]
        else:
            h2 = self.d // 2
            y = x[..., :h2] * x[..., h2:2 * h2]
        return x, y

    def describe(self):
        out = super().describe()
        out.update(op=self.op, n=self.n, d=self.d)
        if self.op == "read":
            out.update(i=self.i, j=self.j)
        if self.op == "linear":
            out.update(h=[float(v) for v in self.h])
        return out


def primitive_task(op: str, n: int = 40, d: int = 20, *, param_seed: int = 0) -> PrimitiveTask:
    rng = np.random.Generator(np.random.PCG64(param_seed))
    i, j = (int(v) for v in rng.choice(n, size=2, replace=False))
    h = rng.standard_normal(d) * np.sqrt(3.0)
    d_out = {"read": d, "linear": 1, "multiply": d // 2}[op]
    return PrimitiveTask(name=op, T=n, d_in=d, d_out=d_out, out_rows=slice(0, n), n=n, d=d, op=op,
                         i=i, j=j, h=h)


def make_task(name: str, *, n: int | None = None, d: int | None = None, kappa: float = 5.0,
              sigma: float = 1.0, k: int = 1, eta: float | None = None, param_seed: int = 0) -> Task:
    """Build a task by name (``TASKS``); sizes default to the paper's (LS: N=20, D=5; primitives: N=40, D=20)."""
    if name in ("gradient", "iterate", "icls"):
        return ls_task(name, n or 20, d or 5, kappa=kappa, sigma=sigma, k=k, eta=eta)
    if name in ("read", "linear", "multiply"):
        return primitive_task(name, n or 40, d or 20, param_seed=param_seed)
    raise ValueError(f"unknown task {name!r}; choose one of {', '.join(TASKS)}")
