"""A second thread that takes the second half of each pass of a solve's steps, synchronised by spinning on atomics.

A pairwise step on a stored Gram makes two passes over the core set (the partner search, then the gradient update),
each 2-20 us on core sets of 2,000-16,000 points.  Numba's parallel regions cost ~10 us to start, about what they
would save.  Here a helper thread lives for one inner solve and spins on a shared control array:

1. the solving thread writes a pass's arguments and its sequence number into the command line (:func:`publish`),
   then runs the first half itself;
2. the helper sees the new number (:func:`next_command`), claims the second half by a compare-and-swap on the
   state word (:func:`claim_second_half`), runs it, writes its result and marks the half done
   (:func:`second_half_done`);
3. the solving thread, its half done, claims the second half too if the helper has not (a helper that the system has
   not scheduled holds up nothing), else waits for it (:func:`wait_for_second_half`) and reads its result.

Each pass moves two cache lines of the control array between the threads (the command; the state with the result),
besides the few entries of the helper's half that the solving thread reads or writes for the step.  The waits spin
with x86's ``pause``, and past :data:`YIELD_AFTER_PAUSES` also give the core away (``sched_yield`` on Linux), so that
a helper whose core is taken by another process costs its solve little.

Control array (int64; floats stored by their bits, read through a float64 view): the command line from
:data:`SEQUENCE` (the pass's number, from 1, then its arguments), the state line from :data:`STATE` (``2 s - 1``:
the second half of pass ``s`` claimed, ``2 s``: done; then its result), and :data:`EXIT`, set to end the helper.
"""

from __future__ import annotations

import platform
import sys
import threading

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

SEQUENCE, ARGUMENTS = 0, 1  # the command line: the pass's number, then up to 7 arguments
STATE, RESULT = 8, 9  # the state line: the second half's state, then up to 7 results
EXIT = 16
CONTROL_SIZE = 24
YIELD_AFTER_PAUSES = 4096  # ~0.1-0.3 ms of spinning: far longer than a half pass


def _entry(context, builder, array_type, array, index):
    return cgutils.get_item_pointer(context, builder, array_type,
                                    context.make_array(array_type)(context, builder, array), [index])


@intrinsic
def atomic_load(typingctx, array, index):
    """``array[index]`` (int64) read with acquire ordering: never hoisted out of a spinning loop."""

    def codegen(context, builder, sig, args):
        return builder.load_atomic(_entry(context, builder, sig.args[0], *args), ordering="acquire", align=8)

    return types.int64(array, index), codegen


@intrinsic
def atomic_store(typingctx, array, index, value):
    """``array[index] = value`` (int64) with release ordering: the writes before it are seen first."""

    def codegen(context, builder, sig, args):
        builder.store_atomic(args[2], _entry(context, builder, sig.args[0], args[0], args[1]), ordering="release",
                             align=8)
        return context.get_dummy_value()

    return types.void(array, index, types.int64), codegen


@intrinsic
def compare_and_swap(typingctx, array, index, expected, new):
    """Set ``array[index]`` to ``new`` if it is ``expected``; returns whether it was."""

    def codegen(context, builder, sig, args):
        pointer = _entry(context, builder, sig.args[0], args[0], args[1])
        return builder.extract_value(builder.cmpxchg(pointer, args[2], args[3], "acq_rel", "acquire"), 1)

    return types.boolean(array, index, types.int64, types.int64), codegen


_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")
_LINUX = sys.platform.startswith("linux")


@intrinsic
def spin_pause(typingctx):
    """x86's ``pause`` in a spinning loop (it frees the core's shared resources); nothing elsewhere."""

    def codegen(context, builder, sig, args):
        if _X86:
            pause = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), []),
                                                   "llvm.x86.sse2.pause")
            builder.call(pause, [])
        return context.get_dummy_value()

    return types.void(), codegen


@intrinsic
def yield_core(typingctx):
    """Let the system run another thread on this core (Linux's ``sched_yield``; elsewhere a ``pause``)."""

    def codegen(context, builder, sig, args):
        if _LINUX:
            sched_yield = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), []),
                                                         "sched_yield")
            builder.call(sched_yield, [])
        elif _X86:
            builder.call(cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), []),
                                                        "llvm.x86.sse2.pause"), [])
        return context.get_dummy_value()

    return types.void(), codegen


@njit(inline="always", cache=True)
def _wait(pauses):
    """One round of a spinning wait that has paused ``pauses`` times; returns the new count."""
    if pauses < YIELD_AFTER_PAUSES:
        spin_pause()
    else:
        yield_core()
    return pauses + 1


@njit(cache=True, nogil=True)
def publish(control, sequence):
    """Make pass ``sequence`` visible to the helper, once its arguments are in the command line."""
    atomic_store(control, SEQUENCE, sequence)


@njit(cache=True, nogil=True)
def next_command(control, seen):
    """Spin until a pass after ``seen`` is published (returns its number) or the helper is told to end (-1)."""
    pauses = 0
    while True:
        sequence = atomic_load(control, SEQUENCE)
        if sequence != seen:
            return sequence
        if atomic_load(control, EXIT) != 0:
            return -1
        pauses = _wait(pauses)


@njit(cache=True, nogil=True)
def claim_second_half(control, sequence):
    """Whether this thread now owns the second half of pass ``sequence`` (nobody had claimed it)."""
    return compare_and_swap(control, STATE, 2 * sequence - 2, 2 * sequence - 1)


@njit(cache=True, nogil=True)
def second_half_done(control, sequence):
    """Mark the second half of pass ``sequence`` done, once its results are in the state line."""
    atomic_store(control, STATE, 2 * sequence)


@njit(cache=True, nogil=True)
def wait_for_second_half(control, sequence):
    """Spin until the second half of pass ``sequence``, claimed by the other thread, is done."""
    pauses = 0
    while atomic_load(control, STATE) != 2 * sequence:
        pauses = _wait(pauses)


def half_bounds(n: int, half: int, block: int) -> tuple[int, int]:
    """Points ``[start, stop)`` of ``half`` (0 or 1) of ``n``: the split rounded up to whole blocks of ``block``."""
    split = min(n, ((n + 1) // 2 + block - 1) // block * block)
    return (0, split) if half == 0 else (split, n)


half_bounds_compiled = njit(inline="always", cache=True)(half_bounds)


def new_control() -> np.ndarray:
    """A control array for one helper thread (its floats are read and written through ``control.view(np.float64)``)."""
    return np.zeros(CONTROL_SIZE, dtype=np.int64)


NO_CONTROL = np.zeros(0, dtype=np.int64)


class HelperThread:
    """Run ``loop(*args)`` (a compiled function that releases the GIL and returns once :func:`next_command` says so)
    on a thread for the span of a ``with`` block; ``control`` is its control array.  Leaving the block tells it to
    end and joins it, also when the block raises."""

    def __init__(self, loop, control: np.ndarray, *args) -> None:
        self.control = control
        self._thread = threading.Thread(target=loop, args=args, name="coresvm-pass-helper", daemon=True)

    def __enter__(self) -> HelperThread:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.control[EXIT] = 1
        self._thread.join()
