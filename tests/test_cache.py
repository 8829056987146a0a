"""ColumnCache byte budget and the compiled LRU slot finder against a pure-Python LRU model."""

from collections import OrderedDict

import numpy as np
import pytest

from coresvm.cache import CLOCK, HITS, MISSES, ColumnCache, cache_slot

# ---------------------------------------------------------------------------
# budget
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n_points", [1, 2, 7, 100, 1001])
@pytest.mark.parametrize("columns", [2, 2.5, 3, 10, 64.9, 5000])
def test_budget_respected_when_two_columns_fit(dtype, n_points, columns):
    column_bytes = n_points * np.dtype(dtype).itemsize
    budget = int(columns * column_bytes)
    cache = ColumnCache(n_points, budget, dtype=dtype)
    assert cache.nbytes <= budget
    assert not cache.over_budget
    # as many columns as fit, but never more columns than points
    assert cache.n_slots == min(budget // column_bytes, n_points) or (n_points < 2 and cache.n_slots == 2)
    assert cache.store.shape == (cache.n_slots, n_points)
    assert cache.store.dtype == np.dtype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n_points", [3, 50, 999])
@pytest.mark.parametrize("budget_columns", [0, 0.3, 1, 1.99])
def test_tiny_budget_keeps_two_columns(dtype, n_points, budget_columns):
    column_bytes = n_points * np.dtype(dtype).itemsize
    budget = int(budget_columns * column_bytes)
    cache = ColumnCache(n_points, budget, dtype=dtype)
    assert cache.over_budget
    assert cache.n_slots == 2
    assert cache.nbytes == 2 * column_bytes


@pytest.mark.parametrize("seed", range(5))
def test_budget_random(seed):
    rng = np.random.RandomState(seed)
    for _ in range(200):
        n_points = int(rng.randint(2, 3000))
        budget = int(rng.randint(0, 64 * n_points * 8))
        dtype = (np.float32, np.float64)[rng.randint(2)]
        cache = ColumnCache(n_points, budget, dtype=dtype)
        assert cache.n_slots >= 2
        fits_two = budget >= 2 * n_points * np.dtype(dtype).itemsize
        assert cache.over_budget == (not fits_two)
        if fits_two:
            assert cache.nbytes <= budget
            # and the budget is not wasted: one more column would not fit (unless all columns are held)
            assert cache.n_slots == n_points or cache.nbytes + n_points * np.dtype(dtype).itemsize > budget


def test_initial_state():
    cache = ColumnCache(10, 10 * 8 * 4)
    store, slot_of, owner, stamp, counters = cache.arrays()
    assert store is cache.store
    assert (slot_of == -1).all() and slot_of.shape == (10,)
    assert (owner == -1).all() and owner.shape == (4,)
    assert cache.hits == 0 and cache.misses == 0
    assert counters.shape == (3,) and len({CLOCK, HITS, MISSES}) == 3


# ---------------------------------------------------------------------------
# LRU behaviour
# ---------------------------------------------------------------------------


class LRUModel:
    """Reference LRU over ``n_slots`` places; learns slot numbers from the cache under test."""

    def __init__(self, n_slots):
        self.n_slots = n_slots
        self.order = OrderedDict()  # point -> slot, least recently used first
        self.hits = 0
        self.misses = 0

    def access(self, point, protected_slot):
        """Returns (hit, evicted point or None, whether a free slot must be used)."""
        if point in self.order:
            self.order.move_to_end(point)
            self.hits += 1
            return True, None, False
        self.misses += 1
        used = set(self.order.values())
        free = [s for s in range(self.n_slots) if s not in used and s != protected_slot]
        if free:
            return False, None, True
        victim = next(p for p, s in self.order.items() if s != protected_slot)
        return False, victim, False

    def commit(self, point, slot, evicted):
        if evicted is not None:
            del self.order[evicted]
        self.order[point] = slot
        self.order.move_to_end(point)


def run_sequence(n_points, n_slots, accesses, protect_rule, rng):
    cache = ColumnCache(n_points, n_slots * n_points * 8)
    assert cache.n_slots == n_slots
    _, slot_of, owner, stamp, counters = cache.arrays()
    model = LRUModel(n_slots)
    n_hits = 0
    for point in accesses:
        protected_slot = protect_rule(model, rng)
        protected_owner = owner[protected_slot] if protected_slot >= 0 else None
        exp_hit, exp_victim, exp_free = model.access(point, protected_slot)
        old_slot_of_point = model.order.get(point)
        slot, hit = cache_slot(slot_of, owner, stamp, counters, point, protected_slot)
        slot = int(slot)
        assert bool(hit) == exp_hit
        n_hits += bool(hit)
        assert 0 <= slot < n_slots
        if exp_hit:
            assert slot == old_slot_of_point
        else:
            assert slot != protected_slot
            if exp_free:
                assert slot not in model.order.values()
            else:
                assert model.order[exp_victim] == slot, "evicted a point other than the least recently used"
                assert slot_of[exp_victim] == -1
        model.commit(point, slot, exp_victim)
        # the compiled state agrees with the model: same resident points in the same slots
        assert owner[slot] == point and slot_of[point] == slot
        resident = {int(p): int(s) for p, s in enumerate(slot_of) if s >= 0}
        assert resident == dict(model.order)
        assert {int(p) for p in owner if p >= 0} == set(model.order)
        if protected_slot >= 0:
            assert owner[protected_slot] == protected_owner
    assert cache.hits == model.hits == n_hits
    assert cache.misses == model.misses == len(accesses) - n_hits
    assert counters[CLOCK] == len(accesses)
    return cache


def no_protection(model, rng):
    return -1


def protect_random_resident(model, rng):
    """Like a pairwise step: protect the slot of another resident column (sometimes none)."""
    if not model.order or rng.rand() < 0.3:
        return -1
    slots = list(model.order.values())
    return slots[rng.randint(len(slots))]


def protect_most_stale(model, rng):
    """Protect the least recently used column: the one LRU would otherwise evict."""
    if len(model.order) < model.n_slots:
        return -1
    return next(iter(model.order.values()))


def test_lru_cyclic_thrash():
    # n_slots + 1 points accessed cyclically: pure LRU misses every time
    accesses = [i % 4 for i in range(40)]
    cache = run_sequence(10, 3, accesses, no_protection, np.random.RandomState(0))
    assert cache.hits == 0 and cache.misses == 40


def test_lru_classic_sequence():
    accesses = [0, 1, 2, 0, 3, 1, 0, 4, 2, 0]
    # 3 slots: 0m 1m 2m 0h 3m(evict 1) 1m(evict 2) 0h 4m(evict 3) 2m(evict 1) 0h
    cache = run_sequence(5, 3, accesses, no_protection, np.random.RandomState(0))
    assert (cache.hits, cache.misses) == (3, 7)


@pytest.mark.parametrize(
    "protect_rule", [no_protection, protect_random_resident, protect_most_stale], ids=["none", "random", "stale"]
)
@pytest.mark.parametrize("n_slots", [2, 3, 7])
@pytest.mark.parametrize("seed", range(3))
def test_lru_matches_model(protect_rule, n_slots, seed):
    rng = np.random.RandomState(seed)
    n_points = 15
    # a mix of locality (repeats of recent points) and random jumps
    accesses = []
    for _ in range(400):
        if accesses and rng.rand() < 0.5:
            accesses.append(accesses[-1 - rng.randint(min(len(accesses), 4))])
        else:
            accesses.append(int(rng.randint(n_points)))
    cache = run_sequence(n_points, n_slots, accesses, protect_rule, rng)
    assert cache.hits > 0 and cache.misses > n_slots


def test_protected_slot_survives_many_misses():
    cache = ColumnCache(50, 2 * 50 * 8)  # the minimum: two slots
    _, slot_of, owner, stamp, counters = cache.arrays()
    keep_slot, hit = cache_slot(slot_of, owner, stamp, counters, 7, -1)
    assert not hit
    for point in range(8, 40):  # every access is a miss; 7 is the least recently used throughout
        slot, hit = cache_slot(slot_of, owner, stamp, counters, point, keep_slot)
        assert not hit and slot != keep_slot
        assert owner[keep_slot] == 7 and slot_of[7] == keep_slot
    slot, hit = cache_slot(slot_of, owner, stamp, counters, 7, -1)
    assert hit and slot == keep_slot
    assert cache.hits == 1 and cache.misses == 33


def test_protected_free_slot_is_not_claimed():
    cache = ColumnCache(10, 3 * 10 * 8)
    _, slot_of, owner, stamp, counters = cache.arrays()
    slot, _ = cache_slot(slot_of, owner, stamp, counters, 4, 0)
    assert slot != 0 and owner[0] == -1


def test_lazy_zeros_is_a_writable_zeroed_c_array_above_and_below_the_threshold():
    from coresvm.cache import LAZY_ZEROS_MIN_BYTES, lazy_zeros

    for shape in [(10, 10), (int(np.sqrt(LAZY_ZEROS_MIN_BYTES / 4)) + 1,) * 2]:
        array = lazy_zeros(shape, np.float32)
        assert array.shape == shape and array.dtype == np.float32
        assert array.flags["C_CONTIGUOUS"] and array.flags["WRITEABLE"]
        assert not array.any()
        array[-1, -1] = 3.0
        assert array.sum() == 3.0


def test_address_space_is_lazy_only_under_linux_overcommit_without_an_address_space_limit(tmp_path, monkeypatch):
    import resource

    from coresvm.cache import address_space_is_lazy

    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    setting = tmp_path / "overcommit_memory"
    for value, lazy in [("0\n", True), ("1\n", True), ("2\n", False)]:
        setting.write_text(value)
        assert address_space_is_lazy(str(setting)) is lazy
    assert address_space_is_lazy(str(tmp_path / "missing")) is False
    monkeypatch.setattr(resource, "getrlimit", lambda which: (2**34, resource.RLIM_INFINITY))  # ulimit -v 16 GiB
    setting.write_text("0\n")
    assert address_space_is_lazy(str(setting)) is False


def test_available_memory_is_capped_by_the_address_space_limit(tmp_path, monkeypatch):
    """Under ``ulimit -v`` the 'auto' budget is a share of what the limit leaves, not of the system's memory."""
    import resource

    import coresvm.cache as cache_module

    status = tmp_path / "status"
    status.write_text("Name:\tpython\nVmPeak:\t 9000000 kB\nVmSize:\t 1048576 kB\n")  # 1 GiB in use
    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    assert cache_module.address_space_headroom(str(status)) is None
    monkeypatch.setattr(resource, "getrlimit", lambda which: (3 * 2**30, resource.RLIM_INFINITY))  # ulimit -v 3 GiB
    assert cache_module.address_space_headroom(str(status)) == 2 * 2**30
    status.write_text("VmSize:\t 4194304 kB\n")  # already past the limit
    assert cache_module.address_space_headroom(str(status)) == 0
    monkeypatch.setattr(cache_module, "_system_available_bytes", lambda: 16 * 2**30)
    monkeypatch.setattr(cache_module, "address_space_headroom", lambda: 2 * 2**30)
    assert cache_module.available_memory_bytes() == 2 * 2**30
    assert cache_module.cache_budgets("auto")[1] == 2**30
    monkeypatch.setattr(cache_module, "address_space_headroom", lambda: None)
    assert cache_module.available_memory_bytes() == 16 * 2**30
