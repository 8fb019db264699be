"""Every exact proof of the command-line tools runs bounded: in a forked child under
``--proof-memory-gib`` and ``--proof-timeout`` (:mod:`polyverify.plumbing.child`).

An exact proof can need far more than the machine has: a wrong weight file (N=20, D=5, every
entry 1) makes the layers' polynomials explode, and FLINT aborts the whole process (SIGABRT,
exit 134) when an allocation fails, with no exception to catch.  In a child under an address-space
limit the parent learns which limit stopped it and says so in one line (exit 2).

* :func:`add_arguments` / :func:`check`: the two options and their validation (the same for
  ``gd``, ``import`` and ``circuit``), checked before any work.
* :func:`call`: a function (a proof) in the child; its value comes back pickled.
* :func:`run_command`: the proving part of a command in the child, its output lines streamed
  back to the parent's ``out`` (and its stderr to the parent's stderr) as they are written.
* :func:`circuit_estimate` / :func:`check_circuit_estimate`: the size of a circuit's proof
  (degree, terms, memory, work) from the circuit alone, in milliseconds, so that a proof that
  cannot fit the limits is refused before it starts, with the estimate.

Defaults (:data:`DEFAULT_MEMORY_GIB`, :data:`DEFAULT_TIMEOUT_S`): the toolkit targets a 24 GiB,
2-core machine; the proof's child gets 8 GiB, leaving the parent (which holds the construction,
the loaded weights and, for ``gd``, the float runs: at most 3.4 GiB measured for the largest
documented circuit, ``docs/performance.md``) and the system the rest.  The largest proof inside
the default size limits takes about 10 s (token-lsa at N x D = 1024, ``docs/performance.md``) and
the largest documented circuit about 24 s, so 600 s leaves more than 20x headroom while a
runaway stops within minutes, not the hour the circuit command's old default allowed.
"""
from __future__ import annotations

import io
import math
import sys

from polyverify.plumbing.child import Stopped, call_limited
from polyverify.plumbing.cli import UsageError, check_range, human_bytes, one_line

#: memory (GiB) the proof's child may add to what it shares with the parent
DEFAULT_MEMORY_GIB = 8.0
#: seconds the proof may take
DEFAULT_TIMEOUT_S = 600.0
#: what the options accept
MEMORY_RANGE = (0.25, 1024)
TIMEOUT_RANGE = (1, 7 * 86400)


def add_arguments(p) -> None:
    """``--proof-memory-gib`` and ``--proof-timeout`` on a command's parser."""
    p.add_argument("--proof-memory-gib", type=float, default=DEFAULT_MEMORY_GIB,
                   help=f"memory the exact proof may use, GiB ({MEMORY_RANGE[0]:g}..{MEMORY_RANGE[1]:g}; default "
                        f"{DEFAULT_MEMORY_GIB:g}: it runs in a child process; beyond this the command stops with "
                        "one line, exit 2, instead of the process aborting)")
    p.add_argument("--proof-timeout", type=float, default=DEFAULT_TIMEOUT_S,
                   help=f"seconds the exact proof may take ({TIMEOUT_RANGE[0]}..{TIMEOUT_RANGE[1]}; default "
                        f"{DEFAULT_TIMEOUT_S:g}; beyond it: one line, exit 2)")


def check(a) -> None:
    """The two options in range (a UsageError naming the flag), before any work."""
    check_range("--proof-memory-gib", a.proof_memory_gib, *MEMORY_RANGE)
    check_range("--proof-timeout", a.proof_timeout, *TIMEOUT_RANGE)


def within_soft_limit(memory_gb: float | None) -> float | None:
    """``memory_gb`` for a child forked from here (``call_limited``: its address space at the fork plus this),
    lowered so that the child's limit is at most this process's own soft address-space limit: a child sets its
    own limit from its start and caps it only by the *hard* limit, which a limited parent (a diagnosis child
    under a tighter soft limit, a command under a bench's cap) may have left far higher.  None stays None where
    this process has no soft limit."""
    import os
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return memory_gb
    try:
        with open("/proc/self/statm") as f:
            vm = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return memory_gb
    left = max(2 ** 20, soft - vm) / 2 ** 30
    return left if memory_gb is None else min(memory_gb, left)


def stopped_message(where: str, e: Stopped) -> str:
    flag = {"time": "--proof-timeout", "memory": "--proof-memory-gib"}.get(e.limit)
    fix = f"raise {flag}" if flag else "raise --proof-memory-gib or --proof-timeout"
    return f"{where + ': ' if where else ''}the exact proof stopped: {one_line(str(e))}; {fix}"


def call(fn, a, where: str = "", on_item=None):
    """``fn()`` (e.g. ``lambda: prove(con)``) in a child under ``a.proof_memory_gib`` and
    ``a.proof_timeout``; its return value (it must pickle: a ``ProofResult`` does), or a
    UsageError naming the limit that stopped it.  An exception ``fn`` raises is raised again.  Called inside a
    limited child (a diagnosis child's nearest construction, a command under a bench's cap), the child's limit
    is at most this process's soft limit (:func:`within_soft_limit`): the outer limit is inherited."""
    try:
        return call_limited(fn, timeout=a.proof_timeout, memory_gb=within_soft_limit(a.proof_memory_gib),
                            on_item=on_item)
    except Stopped as e:
        raise UsageError(stopped_message(where, e)) from None


def prove(con, a, where: str = "", **kw):
    """``verify.prover.proof.prove(con, **kw)`` under the limits (:func:`call`)."""
    from .prover import proof

    return call(lambda: proof.prove(con, **kw), a, where)


class _LineSender(io.TextIOBase):
    """A text stream in the child that sends each complete line (``(tag, text)``) to the parent."""

    def __init__(self, send, tag: str):
        self._send, self._tag, self._buf = send, tag, ""

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        self._buf += s
        if "\n" in self._buf:
            head, _, self._buf = self._buf.rpartition("\n")
            self._send((self._tag, head + "\n"))
        return len(s)

    def flush(self) -> None:
        if self._buf:
            self._send((self._tag, self._buf))
            self._buf = ""


def run_command(body, out, a, where: str = ""):
    """``body(out)`` (the proving part of a command: prints to ``out``, returns the exit status)
    in a child under the limits; what it prints reaches the parent's ``out`` (and its stderr the
    parent's stderr) line by line as it goes.  Past a limit: a UsageError naming it."""
    try:
        return run_streamed(body, out, timeout=a.proof_timeout, memory_gb=a.proof_memory_gib)
    except Stopped as e:
        raise UsageError(stopped_message(where, e)) from None


def run_streamed(body, out, *, timeout: float, memory_gb: float | None):
    """:func:`run_command` under the given limits, raising :class:`polyverify.plumbing.child.Stopped` past
    one (for a step after a verdict, which reports it in a line of its own: ``import``'s nearby
    search); ``body``'s return value comes back (it must pickle).  The child's memory limit is at most this
    process's soft limit (:func:`within_soft_limit`), as :func:`call`'s."""
    def child(send):
        o, e = _LineSender(send, "out"), _LineSender(send, "err")
        sys.stderr = e
        try:
            return body(o)
        finally:
            o.flush()
            e.flush()

    def relay(item):
        tag, text = item
        (out if tag == "out" else sys.stderr).write(text)

    return call_limited(child, timeout=timeout, memory_gb=within_soft_limit(memory_gb), on_item=relay)


# ------------------------------------------------------------------ the circuit proof's size

#: bytes per term of the largest polynomials, measured over the whole proof (peak resident memory
#: of ``prove`` on compiled (x1+...+x10)^d, d = 12..20, FLINT backend: 61-108 bytes per term of
#: the output; rounded up)
BYTES_PER_TERM = 128
#: term products per second of FLINT's multiplication in the proof, counted as terms(a) x
#: terms(b) per product: measured 6.3e7-1.3e8 for the largest products of (x1+...+x10)^16, ^17,
#: ^20 and (x1+...+x8)^20 on this 2-core machine (^20: 7.15e9 term products in 107 s); the
#: estimate uses 1e8, so it refuses what would take longer than the limit here, give or take 2x
TERM_PRODUCTS_PER_S = 1e8
_HUGE = 1e300


def _monomials(v: int, d: int) -> float:
    """C(v + d, d): the monomials of degree <= d in v variables (a float, capped at 1e300)."""
    if v == 0 or d == 0:
        return 1.0
    lg = math.lgamma(v + d + 1) - math.lgamma(v + 1) - math.lgamma(d + 1)
    return _HUGE if lg > 690 else math.exp(lg)


def _monomials_between(v: int, lo: int, d: int) -> float:
    """The monomials of degree lo..d in v variables (a float): C(v+d, d) - C(v+lo-1, lo-1)."""
    if lo <= 0:
        return _monomials(v, d)
    hi, below = _monomials(v, d), _monomials(v, lo - 1)
    return hi if hi >= _HUGE else max(1.0, hi - below)


def circuit_estimate(g) -> dict:
    """The size of a circuit's exact proof, from the (validated) circuit alone, in O(size log size).

    Per node, an upper bound on the terms of its polynomial: 1 for an input or a constant, the sum
    over the operands for an ``add``, the product for a ``mul``, each capped by the monomials of
    its degrees (lowest .. formal) in the inputs it depends on (exact for a power of a sum).  The
    work: a ``mul`` is computed as the compiler computes it (``constructions/compiler/linearise.py``),
    a balanced tree of binary
    products, the two shallowest factors first, a product of two factors seen before (``x*x`` in
    ``x^20``) computed once; a product of factors of a and b terms costs a x b term products.

    The work is a fair estimate of the time (it matches the measured products of powers of sums,
    where the proof's cost is); the term bounds are upper bounds, close for a power of a sum but
    far above the truth for circuits that add many shared subexpressions (a random 10,000-gate
    circuit: 1.6e8 bounded, about 5,000 real terms per output), so only the time is refused on
    (the child's memory limit stops the rest).  Returns degree, terms (the largest output's
    bound), bytes (that bound at :data:`BYTES_PER_TERM`), work, seconds (at
    :data:`TERM_PRODUCTS_PER_S`)."""
    import heapq

    import networkx as nx

    terms: dict = {}
    deg: dict = {}
    low: dict = {}  # the lowest degree a term can have
    level: dict = {}
    support: dict = {}
    left = {v: g.out_degree(v) for v in g.nodes}
    n_inputs = 0
    work = 0.0
    for v in nx.topological_sort(g):
        op = g.nodes[v]["op"]
        if op == "input":
            terms[v], deg[v], low[v], level[v], support[v] = 1.0, 1, 1, 0, 1 << n_inputs
            n_inputs += 1
            continue
        if op == "const":
            terms[v], deg[v], low[v], level[v], support[v] = 1.0, 0, 0, 0, 0
            continue
        ops = [(u, d.get("mult", 1)) for u, _, d in g.in_edges(v, data=True)]
        s = 0
        for u, _ in ops:
            s |= support[u]
        nv = s.bit_count()
        if op == "add":
            d = max(deg[u] for u, _ in ops)
            lo = min(low[u] for u, _ in ops)
            t = sum(terms[u] for u, _ in ops)
            lv = max(level[u] for u, _ in ops)
        else:
            d = sum(m * deg[u] for u, m in ops)
            lo = sum(m * low[u] for u, m in ops)
            # the compiler's tree: (level, terms, n, degrees, key) factors, the two shallowest first
            # (n: a tie-break; key: which product, so that a repeated one counts once)
            heap = [(level[u], terms[u], i, (low[u], deg[u]), repr(u))
                    for i, (u, m) in enumerate(ops) if deg[u] > 0 for _ in range(m)]
            heapq.heapify(heap)
            done = set()
            n = len(heap)
            while len(heap) > 1:
                la, ta, _, (a0, a1), ka = heapq.heappop(heap)
                lb, tb, _, (b0, b1), kb = heapq.heappop(heap)
                key = f"({min(ka, kb)}*{max(ka, kb)})"
                if key not in done:
                    done.add(key)
                    work = min(_HUGE, work + ta * tb)
                n += 1
                heapq.heappush(heap, (max(la, lb) + 1, min(ta * tb, _monomials_between(nv, a0 + b0, a1 + b1)), n,
                                      (a0 + b0, a1 + b1), key))
            t = heap[0][1] if heap else 1.0
            lv = heap[0][0] if heap else 0
        terms[v], deg[v], low[v], level[v], support[v] = min(t, _monomials_between(nv, lo, d), _HUGE), d, lo, lv, s
        for u, _ in ops:  # free what no later node needs
            left[u] -= 1
            if left[u] == 0:
                support[u] = 0
    outs = [v for v, o in g.nodes(data="output") if o is not None]
    top = max((terms[v] for v in outs), default=0.0)
    return {"degree": max((deg[v] for v in outs), default=0), "terms": top,
            "bytes": min(_HUGE, top * BYTES_PER_TERM), "work": work, "seconds": work / TERM_PRODUCTS_PER_S}


def _count(x: float) -> str:
    return f"{x:.3g}" if x >= 1e6 else f"{int(x)}"


def describe_estimate(est: dict) -> str:
    return (f"degree {est['degree']}, at most {_count(est['terms'])} terms in an output "
            f"(~{human_bytes(est['bytes'])}), {_count(est['work'])} term products (~{est['seconds']:.3g} s)")


def check_circuit_estimate(est: dict, a, where: str) -> None:
    """Refuse (UsageError, one line with the estimate and the limit) a circuit whose proof
    cannot finish within ``--proof-timeout`` by :func:`circuit_estimate`."""
    if est["seconds"] > a.proof_timeout:
        raise UsageError(f"{where}: the exact proof would not finish within the time limit: estimated "
                         f"{describe_estimate(est)}, above --proof-timeout {a.proof_timeout:g} s "
                         f"(raise it, or prove a smaller circuit)")
