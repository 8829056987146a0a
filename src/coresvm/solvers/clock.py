"""A wall clock for compiled loops that does not take the GIL.

The solvers check ``max_time`` from inside ``nogil`` Numba functions.  Numba has no
clock of its own; the portable way, an ``objmode`` block calling
``time.perf_counter``, re-acquires the GIL on every reading.  With one-vs-one
pairs in ``n_jobs`` threads that serializes the workers: a thread that reads the
clock waits until the thread running Python (a pair's setup) lets go of the GIL,
up to the interpreter's switch interval (5 ms).  On Linux the loops therefore
call libc's ``clock_gettime(CLOCK_MONOTONIC)`` directly -- the clock behind
``time.perf_counter`` there -- declared by its symbol name, so the compiled
functions stay cacheable.  Elsewhere they keep the ``objmode`` clock.

The Python side of a fit's ``max_time`` reads :func:`fit_clock`: ``time.perf_counter``
less the seconds this process has spent in Numba's compiler (typing, code generation,
loading from the cache).  In a fresh environment the first fit compiles its loops on
the first call -- seconds, where ``max_time`` may be a fraction of one -- and that
one-time cost must not eat the solver's budget (a CSR fit with ``max_time=0.1`` used
to stop after its first round, at 81% instead of 93% accuracy).
"""

from __future__ import annotations

import sys
import threading
import time

import numpy as np
from llvmlite import ir
from numba import njit, objmode, types
from numba.core import cgutils, event
from numba.extending import intrinsic

CLOCK_MONOTONIC_LINUX = 1  # <time.h> on Linux (macOS numbers its clocks differently)
NATIVE_CLOCK = sys.platform.startswith("linux") and sys.maxsize > 2**32  # 64-bit time_t and long


@intrinsic
def _clock_gettime(typingctx, clock_id, timespec):
    """``clock_gettime(clock_id, timespec)`` from libc, resolved by name when the function is loaded."""
    signature = types.int32(types.int32, types.voidptr)

    def codegen(context, builder, sig, args):
        function_type = ir.FunctionType(ir.IntType(32), [ir.IntType(32), ir.IntType(8).as_pointer()])
        function = cgutils.get_or_insert_function(builder.module, function_type, "clock_gettime")
        return builder.call(function, args)

    return signature, codegen


if NATIVE_CLOCK:

    @njit(cache=True, nogil=True)
    def now():
        """Seconds of the monotonic clock (``time.perf_counter``'s), read without the GIL."""
        timespec = np.zeros(2, dtype=np.int64)  # struct timespec {time_t tv_sec; long tv_nsec;} on 64-bit Linux
        _clock_gettime(np.int32(CLOCK_MONOTONIC_LINUX), timespec.ctypes.data)
        return timespec[0] + 1e-9 * timespec[1]

else:  # pragma: no cover - exercised on macOS/Windows only

    @njit(cache=True)
    def now():
        """Seconds of ``time.perf_counter`` (takes the GIL for the reading)."""
        with objmode(t="float64"):
            t = time.perf_counter()
        return t


class _CompileTimer(event.Listener):
    """Adds up the wall time of the outermost ``numba:compiler_lock`` sections: every compilation (and cache load)
    of any dispatcher in the process holds Numba's global, re-entrant compiler lock."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._depth = 0  # nesting of the (re-entrant) lock: only one thread can be inside it
        self._entered = 0.0
        self._guard = threading.Lock()

    def on_start(self, ev: event.Event) -> None:
        if self._depth == 0:
            self._entered = time.perf_counter()
        self._depth += 1

    def on_end(self, ev: event.Event) -> None:
        self._depth -= 1
        if self._depth == 0:
            with self._guard:
                self.seconds += time.perf_counter() - self._entered


_COMPILE_TIMER = _CompileTimer()
event.register("numba:compiler_lock", _COMPILE_TIMER)


def compile_seconds() -> float:
    """Seconds this process has spent compiling (or loading from the cache) Numba functions so far.

    Returns
    -------
    float
        Wall-clock seconds inside Numba's compiler lock since :mod:`coresvm` was imported, for every
        compiled function, coresvm's or not.
    """
    return _COMPILE_TIMER.seconds


def fit_clock() -> float:
    """``time.perf_counter()`` without the time spent compiling: the clock that ``max_time`` budgets read.

    Returns
    -------
    float
        Seconds; only differences are meaningful.  Between two readings in the same thread it advances by the
        wall time between them less the compilation in between, so a fit's first call of a loop that Numba
        compiles (seconds in a fresh environment) costs none of its ``max_time``.
    """
    return time.perf_counter() - _COMPILE_TIMER.seconds
