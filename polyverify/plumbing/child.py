"""Work in a forked child with a wall-clock limit and an address-space limit.

An exact symbolic computation (a proof of a large circuit, the polynomial view of learned
weights) can need more memory than the machine has, and FLINT aborts the whole process when an
allocation fails: no exception, no one-line error.  Run it here and the parent learns, in one
line, which limit stopped it.  Imports nothing of the project.

* :func:`run_limited`: a generator's small items, streamed, and a one-line status (what stopped
  it, if anything); the items before a stop are kept.
* :func:`call_limited`: one function's return value (pickled across the process boundary), or
  :class:`Stopped` naming the limit; an exception the function raises is raised again in the
  parent (its child traceback attached as a note).

The child ignores SIGINT (Ctrl-C reaches the whole process group): the parent, interrupted
while it waits (Ctrl-C, or SIGTERM / SIGHUP sent to the parent alone, which ``polyverify.plumbing.cli`` turns
into a :class:`KeyboardInterrupt` too), kills the child and lets the interrupt go on.  If the
parent dies without a chance to (SIGKILL), the kernel kills the child (``PR_SET_PDEATHSIG``).
"""
from __future__ import annotations

import multiprocessing as mp
import pickle
import queue
import signal
import time


class Stopped(Exception):
    """The child did not finish: ``limit`` is ``"time"``, ``"memory"`` or ``None`` (it died some
    other way); the message is one line (``"did not finish within the time limit (600 s)"``)."""

    def __init__(self, limit: str | None, message: str):
        super().__init__(message)
        self.limit = limit


def _vm_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            import os

            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):  # pragma: no cover - not Linux
        return 0


def _gib(x) -> str:
    return f"{x:g} GiB"


def _time_message(timeout) -> str:
    return f"did not finish within the time limit ({timeout:g} s)"


def _memory_message(memory_gb) -> str:
    return f"stopped at the memory limit ({_gib(memory_gb)})"


def _child(body, q, memory_gb: float | None) -> None:
    """The forked child: quiet, under the memory limit, runs ``body`` and reports through ``q``."""
    _quiet_child()
    if memory_gb:
        try:
            import resource

            lim = _vm_bytes() + int(memory_gb * 2 ** 30)
            _, hard = resource.getrlimit(resource.RLIMIT_AS)
            if hard != resource.RLIM_INFINITY:  # never above the limit this process was given
                lim = min(lim, hard)
            resource.setrlimit(resource.RLIMIT_AS, (lim, hard if hard != resource.RLIM_INFINITY else lim))
        except (ImportError, ValueError, OSError):  # pragma: no cover
            pass
    try:
        body(lambda item: q.put(("item", item)))
        q.put(("done", None))
    except MemoryError:
        q.put(("memory", None))
    except BaseException as e:  # noqa: BLE001 - reported, not raised, across the process boundary
        import traceback

        try:
            blob = pickle.dumps(e)
            pickle.loads(blob)
        except Exception:  # noqa: BLE001 - an exception that does not pickle goes as text
            blob = None
        q.put(("raise", (blob, f"{type(e).__name__}: {e}", traceback.format_exc())))


def _quiet_child() -> None:
    """The child reports through the queue: Ctrl-C is the parent's; its stdout and stderr are silenced,
    where FLINT prints before aborting on a failed allocation (the parent names the limit in one line);
    the parent's buffered output was flushed before the fork (multiprocessing does that)."""
    import os

    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):  # sent to the child itself: it ends
            if sig is not None:
                signal.signal(sig, signal.SIG_DFL)
    except (ValueError, OSError):  # pragma: no cover
        pass
    _die_with_parent()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.dup2(devnull, 1)  # FLINT prints its "Unable to allocate" exception to stdout
    import faulthandler

    faulthandler.disable()  # its own copy of the old stderr (pytest enables it) would print the abort


def _die_with_parent() -> None:
    """Linux: the kernel sends the child SIGKILL when the parent dies, however it dies (a
    SIGKILL to the parent included, which no handler of the parent's can see), so no proof child
    outlives its command.  If the parent is already gone, the child ends at once."""
    import ctypes
    import os

    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return
    if os.getppid() != parent:  # the parent died before the prctl
        os._exit(1)


def _run(body, timeout: float, memory_gb: float | None, on_item=None):
    """The child runs ``body(put)``, which sends ``("item", x)`` for each ``put(x)``; then the child
    sends ``("done", None)``,
    or ``("raise", (pickled exception or None, text, traceback))``; returns ``(items, kind, detail)``
    with kind ``done`` / ``time`` / ``memory`` / ``died`` / ``raise``."""
    ctx = mp.get_context("fork")
    q = ctx.Queue()

    p = ctx.Process(target=_child, args=(body, q, memory_gb), daemon=True)  # forked: nothing is pickled
    p.start()
    items, kind, detail = [], None, None
    deadline = time.monotonic() + timeout
    try:
        while kind is None:
            if time.monotonic() >= deadline and p.is_alive():  # also while items keep coming
                kind = "time"
                break
            try:
                k, val = q.get(timeout=min(1.0, max(0.01, deadline - time.monotonic())))
            except queue.Empty:
                if p.is_alive() and time.monotonic() >= deadline:
                    kind = "time"
                elif not p.is_alive():
                    try:  # the last messages may still be in the pipe
                        k, val = q.get(timeout=0.5)
                    except queue.Empty:
                        kind, detail = ("memory" if memory_gb and p.exitcode == -signal.SIGABRT
                                        else "died"), p.exitcode
                        continue
                else:
                    continue
            if kind is not None:
                break
            if k == "item":
                items.append(val)
                if on_item is not None:
                    on_item(val)
            else:
                kind, detail = k, val
    finally:
        if p.is_alive():
            p.kill()
        p.join(5)
    return items, kind, detail


def _died_message(exitcode, memory_gb) -> str:
    sig = -exitcode if isinstance(exitcode, int) and exitcode < 0 else None
    how = f"killed by signal {sig} ({signal.Signals(sig).name})" if sig else f"exit code {exitcode}"
    more = " (the system's out-of-memory killer?)" if sig == signal.SIGKILL else ""
    return f"the worker died ({how}){more}"


def run_limited(gen_fn, *, timeout: float, memory_gb: float | None):
    """Run ``gen_fn()`` (a generator of small JSON-able items) in a forked child with a wall-clock
    limit and an address-space limit; return ``(items, status)`` with status ``"done"``, or a
    one-line reason (time limit, memory limit, error) for what stopped it."""
    def body(put):
        for item in gen_fn():
            put(item)

    items, kind, detail = _run(body, timeout, memory_gb)
    if kind == "done":
        return items, "done"
    if kind == "time":
        return items, _time_message(timeout)
    if kind == "memory":
        msg = _memory_message(memory_gb)
        return items, msg + (" (FLINT aborts when it cannot allocate)" if detail is not None else "")
    if kind == "raise":
        return items, detail[1] if not detail[1].startswith("OverflowError: ") else detail[1][15:]
    return items, _died_message(detail, memory_gb)


def call_limited(fn, *, timeout: float, memory_gb: float | None, on_item=None):
    """``fn()`` in a forked child under the limits: its return value (it must pickle), or
    :class:`Stopped` (``limit`` ``"time"`` / ``"memory"`` / ``None``).  ``fn`` may take one
    argument, ``send``: ``send(x)`` hands ``x`` (small, picklable) to ``on_item(x)`` in the parent
    as it goes (e.g. output lines).  An exception ``fn`` raises is raised here again."""
    import inspect

    takes_send = bool(inspect.signature(fn).parameters)

    def body(put):
        value = fn(put) if takes_send else fn()
        put(("__value__", pickle.dumps(value)))

    def forward(x):
        if on_item is not None and not _is_value(x):
            on_item(x)

    items, kind, detail = _run(body, timeout, memory_gb, on_item=forward)
    if kind == "done":
        vals = [x for x in items if _is_value(x)]
        if not vals:  # pragma: no cover - "done" comes after the value
            raise Stopped(None, "the worker finished without a result")
        return pickle.loads(vals[-1][1])
    if kind == "time":
        raise Stopped("time", _time_message(timeout))
    if kind == "memory":
        raise Stopped("memory", f"reached the memory limit ({_gib(memory_gb)})")
    if kind == "raise":
        blob, text, tb = detail
        exc = pickle.loads(blob) if blob is not None else RuntimeError(text)
        if hasattr(exc, "add_note"):
            exc.add_note("raised in the child process:\n" + tb.rstrip())
        raise exc
    raise Stopped(None, _died_message(detail, memory_gb))


def _is_value(x) -> bool:
    return isinstance(x, tuple) and len(x) == 2 and x[0] == "__value__"
