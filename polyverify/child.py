"""Work in a forked child with a wall-clock limit and an address-space limit.

An exact symbolic computation (a proof of a large circuit, the polynomial view of learned
weights) can need more memory than the machine has, and FLINT aborts the whole process when an
allocation fails: no exception, no one-line error.  Run it here and the parent learns, in one
line, which limit stopped it.  Imports nothing of the project.
"""
from __future__ import annotations

import multiprocessing as mp
import queue
import time


def _vm_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            import os

            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):  # pragma: no cover - not Linux
        return 0


def run_limited(gen_fn, *, timeout: float, memory_gb: float | None):
    """Run ``gen_fn()`` (a generator of small JSON-able items) in a forked child with a wall-clock
    limit and an address-space limit; return ``(items, status)`` with status ``"done"``, or a
    one-line reason (time limit, memory limit, error) for what stopped it."""
    ctx = mp.get_context("fork")
    q = ctx.Queue()

    def child():
        # the child reports through the queue; silence its stderr, where FLINT prints two lines
        # before aborting on a failed allocation (the parent names the limit in one line)
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        if memory_gb:
            try:
                import resource

                lim = _vm_bytes() + int(memory_gb * 2 ** 30)
                resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
            except (ImportError, ValueError, OSError):  # pragma: no cover
                pass
        try:
            for item in gen_fn():
                q.put(("item", item))
            q.put(("done", None))
        except MemoryError:
            q.put(("stop", f"stopped at the memory limit ({memory_gb:g} GiB)"))
        except OverflowError as e:
            q.put(("stop", str(e)))
        except Exception as e:  # noqa: BLE001 - reported, not raised, across the process boundary
            q.put(("stop", f"{type(e).__name__}: {e}"))

    p = ctx.Process(target=child, daemon=True)
    p.start()
    items, status = [], None
    deadline = time.monotonic() + timeout
    while status is None:
        try:
            kind, val = q.get(timeout=min(1.0, max(0.01, deadline - time.monotonic())))
        except queue.Empty:
            if time.monotonic() >= deadline or not p.is_alive():
                status = (f"did not finish within the time limit ({timeout:g} s)" if p.is_alive()
                          else f"the worker died (exit code {p.exitcode}; FLINT aborts when it cannot "
                               f"allocate: the memory limit, {memory_gb} GiB?)")
            continue
        if kind == "item":
            items.append(val)
        else:
            status = "done" if kind == "done" else val
    if p.is_alive():
        p.kill()
    p.join(5)
    return items, status
