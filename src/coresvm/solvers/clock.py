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
"""

from __future__ import annotations

import sys
import time

import numpy as np
from llvmlite import ir
from numba import njit, objmode, types
from numba.core import cgutils
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
