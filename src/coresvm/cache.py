"""LRU cache of extended-kernel columns with a byte budget.

The full-gradient solvers need whole columns ``Q[:, i]`` (``m`` values each).
The cache holds as many as the byte budget allows, evicting the least recently
used one.  It is a bundle of plain arrays so the compiled solver loop can use
it without leaving Numba; :class:`ColumnCache` is the Python-side owner.
"""

from __future__ import annotations

import mmap
import os

import numpy as np
from numba import njit

# counters[] layout
CLOCK, HITS, MISSES = 0, 1, 2

# cache_size='auto': the kernel caches keep this budget; a core set's Gram may take this share of the memory
# available when the fit starts (its pages are touched only as the core set grows).
AUTO_CACHE_BYTES = 200 * 2**20
AUTO_CORE_SET_SHARE = 0.5


# Arrays at least this large come from their own private anonymous mapping.
LAZY_ZEROS_MIN_BYTES = 32 * 2**20


def lazy_zeros(shape: tuple[int, ...], dtype) -> np.ndarray:
    """``np.zeros(shape, dtype)`` whose pages the system provides only when first written, not advised to huge pages.

    A core set's Gram matrix is reserved at the size its budget allows and written a block at a time as the
    core set grows, so its page faults are a large part of a big fit.  ``np.zeros`` of a large array advises
    the kernel to back it with transparent huge pages, and where the system compacts memory on demand (THP
    ``defrag=madvise``) those faults cost more than the 4 KiB ones: touching 1 GiB took 1.6-3.3 s with
    ``np.zeros``, 0.83-0.93 s in a shared mapping and 0.55-0.69 s in a private one (a 2-core VM).  The
    mapping is zero-filled and released with the array.  Falls back to ``np.zeros`` for small arrays.
    """
    dtype = np.dtype(dtype)
    size = int(np.prod(shape)) * dtype.itemsize
    if size < LAZY_ZEROS_MIN_BYTES:
        return np.zeros(shape, dtype=dtype)
    try:
        mapping = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except (OSError, ValueError, AttributeError):
        return np.zeros(shape, dtype=dtype)
    return np.frombuffer(mapping, dtype=dtype).reshape(shape)  # the array's base keeps the mapping alive


def address_space_is_lazy(overcommit_setting: str = "/proc/sys/vm/overcommit_memory") -> bool:
    """Whether reserving address space costs nothing: Linux with overcommit (``vm.overcommit_memory`` 0 or 1) and
    no limit on the process's address space.  Under strict accounting (2) a reservation is charged in full against
    the commit limit; under ``ulimit -v`` (batch schedulers' virtual-memory limits) it uses up the limit that later
    allocations need; on other systems it may be committed at once.  Callers should then allocate as they grow."""
    if address_space_headroom() is not None:
        return False
    try:
        with open(overcommit_setting) as setting:
            return setting.read().strip() in ("0", "1")
    except OSError:
        return False


def available_memory_bytes() -> int:
    """Memory the process can take without swapping: the system's (Linux ``MemAvailable``; else free physical
    pages), and no more than its address-space limit leaves (:func:`address_space_headroom`)."""
    system = _system_available_bytes()
    headroom = address_space_headroom()
    return system if headroom is None else min(system, headroom)


def _system_available_bytes() -> int:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 4 * AUTO_CACHE_BYTES


def address_space_headroom(status_file: str = "/proc/self/status") -> int | None:
    """Bytes of address space left under ``ulimit -v`` (``RLIMIT_AS``, batch schedulers' ``h_vmem``): the limit
    less the process's current size (``VmSize``; 0 where unknown).  None when there is no limit."""
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, OSError, ValueError):
        return None
    if limit == resource.RLIM_INFINITY:
        return None
    used = 0
    try:
        with open(status_file) as status:
            for line in status:
                if line.startswith("VmSize:"):
                    used = int(line.split()[1]) * 1024
    except OSError:
        pass
    return max(limit - used, 0)


def cache_budgets(cache_size: float | str, sharers: int = 1) -> tuple[int, int]:
    """``(kernel cache bytes, core-set Gram bytes)`` for an estimator's ``cache_size`` (MB or 'auto'); with 'auto',
    ``sharers`` core sets solved at the same time divide the share of the available memory (a given size is each
    one's)."""
    if isinstance(cache_size, str):  # 'auto'
        share = AUTO_CORE_SET_SHARE * available_memory_bytes() / max(1, sharers)
        return AUTO_CACHE_BYTES, max(AUTO_CACHE_BYTES, int(share))
    budget = int(cache_size * 2**20)
    return budget, budget


class ColumnCache:
    """Storage for up to ``n_slots`` columns of length ``n_points``.

    Parameters
    ----------
    n_points : int
        Length of one column (the number of training points).
    budget_bytes : int
        Upper bound on the bytes of column storage.  At least two columns are
        always kept (a pairwise step needs two at once), so a budget below two
        columns is raised to two and :attr:`over_budget` is set.
    dtype : numpy dtype
        Storage type of the columns (float64 or float32).
    """

    def __init__(self, n_points: int, budget_bytes: int, dtype=np.float64):
        itemsize = np.dtype(dtype).itemsize
        column_bytes = max(n_points, 1) * itemsize
        fits = int(budget_bytes // column_bytes)
        self.over_budget = fits < 2
        self.n_slots = max(2, min(fits, n_points))
        self.store = np.zeros((self.n_slots, n_points), dtype=dtype)
        self.slot_of = np.full(n_points, -1, dtype=np.int32)
        self.owner = np.full(self.n_slots, -1, dtype=np.int64)
        self.stamp = np.zeros(self.n_slots, dtype=np.int64)
        self.counters = np.zeros(3, dtype=np.int64)

    @property
    def nbytes(self) -> int:
        """Bytes held by the column storage."""
        return int(self.store.nbytes)

    @property
    def hits(self) -> int:
        return int(self.counters[HITS])

    @property
    def misses(self) -> int:
        return int(self.counters[MISSES])

    def arrays(self):
        return self.store, self.slot_of, self.owner, self.stamp, self.counters


@njit(cache=True)
def cache_slot(slot_of, owner, stamp, counters, point, protected_slot):
    """Find the slot of ``point``; on a miss, claim the least recently used slot.

    Returns ``(slot, hit)``.  On a miss the caller must fill ``store[slot]``.
    ``protected_slot`` is never evicted (the other column of a pairwise step).
    """
    counters[CLOCK] += 1
    slot = slot_of[point]
    if slot >= 0:
        counters[HITS] += 1
        stamp[slot] = counters[CLOCK]
        return slot, True
    counters[MISSES] += 1
    victim = -1
    oldest = np.iinfo(np.int64).max
    for s in range(owner.shape[0]):
        if s == protected_slot:
            continue
        if owner[s] < 0:
            victim = s
            break
        if stamp[s] < oldest:
            oldest = stamp[s]
            victim = s
    if owner[victim] >= 0:
        slot_of[owner[victim]] = -1
    owner[victim] = point
    slot_of[point] = victim
    stamp[victim] = counters[CLOCK]
    return victim, False
