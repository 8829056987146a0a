"""The vertex search's random draws, written once for every loop.

Two generators are in use, and each function keeps the stream of the loop it came from (a model is
bit-identical for a fixed ``random_state``):

* NumPy's ``RandomState`` in the Python-level loops (the engine's start, the core-set rounds, the gsvm
  family's block search): :func:`balanced_initial_points`, :func:`draw_distinct`, :func:`next_candidates`,
  :func:`draw_points`;
* Numba's per-thread generator inside compiled loops: :func:`draw_candidates` (engine, SphereSVM / MNSVM /
  BVM violator search) and :func:`balanced_start` (solvers/dense.py).

The two "fair" draws (:func:`draw_candidates`, :func:`draw_points`) and the two class-balanced starts
(:func:`balanced_initial_points`, :func:`balanced_start`) have the same distribution; each pair differs only in
its generator.  :func:`strata` builds the class index both fair draws read.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# A sweep's permutation costs 8 bytes per point.  Beyond 2^22 points (32 MiB) the
# candidates of a round are drawn independently instead: a run scores far fewer
# than m points (rounds x n_candidates; a few hundred thousand for thousands of
# SVs), so a sweep would never wrap and its draws are, up to the rare repeat,
# uniform draws without replacement as well.  Memory then stays O(1) per point.
SWEEP_MAX_POINTS = 2**22


def draw_distinct(rng, m: int, k: int) -> np.ndarray:
    """``min(k, m)`` distinct uniform random indices in ``[0, m)``, sorted, with O(k) memory.

    Draws with replacement and rejects repeats (RandomState.choice without
    replacement would permute all ``m``); deterministic for a given ``rng`` state.
    """
    k = min(k, m)
    if 2 * k >= m:  # rejection would take long (coupon collector); a permutation is O(k) memory here
        return np.sort(rng.permutation(m)[:k]).astype(np.int64)
    picks = np.unique(rng.randint(0, m, size=k))
    while len(picks) < k:
        picks = np.unique(np.concatenate([picks, rng.randint(0, m, size=k - len(picks))]))
    return picks.astype(np.int64)


def next_candidates(rng, problem, n_candidates: int, stratified: bool, sweep, sweep_pos):
    """The core-set loop's next candidates and the new sweep position.

    Uniform: the next ``n_candidates`` points of a random permutation (a sweep,
    so no point is scored twice before all have been scored once; a fresh
    permutation after each pass; past :data:`SWEEP_MAX_POINTS` points, distinct
    random points instead, see :func:`draw_distinct`).  Stratified: gsvm's "fair" draw, a class
    first, then a point of it (Strack 2013, option -s).
    """
    if stratified:
        labels = np.unique(problem.y)
        members = [np.flatnonzero(problem.y == label) for label in labels]
        which = rng.randint(0, len(labels), size=n_candidates)
        picks = np.array([members[k][rng.randint(0, len(members[k]))] for k in which], dtype=np.int64)
        return np.unique(picks), sweep_pos
    if sweep is None:
        return draw_distinct(rng, problem.n_points, n_candidates), sweep_pos
    m = len(sweep)
    if sweep_pos + n_candidates > m:
        sweep[:] = rng.permutation(m)
        sweep_pos = 0
    return sweep[sweep_pos : sweep_pos + n_candidates], sweep_pos + n_candidates


# Near-margin candidates (NearMarginPoints): a point is near the margin when its slack, (score - mean score) / scale,
# was below NEAR_MARGIN_SLACK (the L2-SVM: a margin y f(x) below 1.5); a round adds at most NEAR_MARGIN_SHARE of its
# sample's size of them; and it adds them once the rounds have drawn as many points as there are and a round's
# uniform draw holds fewer than NEAR_MARGIN_VIOLATORS violators.  The window: in the last rounds of the 1M
# checkerboard (C=640), a third of the violators had last scored at a slack of 0.1-0.2, a third at 0.2-0.4; with a
# window of 0.1 the near-margin points ran out and 12-16 rounds each added 50-120 violators from 40,000 uniform
# draws.  At 0.25 its fits (seeds 0-3) took 38-45 rounds against 38-52 and 8.5-11.2 s against 9.2-13.6 s; ijcnn1
# (C=1024) took 27-30 rounds against 28-32; a9a 19 and 23 against 20 and 23 (seeds 0-1); w8a (seeds 0-1) and KDD99
# (seed 0) kept their paths.
NEAR_MARGIN_SLACK = 0.25
NEAR_MARGIN_SHARE = 0.5
NEAR_MARGIN_VIOLATORS = 0.03


class NearMarginPoints:
    """Each point's slack ``(score - mean score) / scale`` when it was last scored, so that the late rounds of a
    core-set fit score again the points that were near the margin.

    Late in a fit the violators are few, and they are points that scored near the margin before (ijcnn1 at C=256:
    from the 18th of 51 rounds on, every violator had last scored at a margin below 2, nine in ten below 1.4); a
    uniform sample finds only its share of them, so a round adds a handful and the loop takes many rounds.  Once
    the rounds have drawn as many points as there are and a sample holds few violators (:meth:`wanted`), each
    round (a test's as well: when the test fails, its violators are all found at once) also scores the points
    outside the core set with the smallest slack below :data:`NEAR_MARGIN_SLACK` (:meth:`nearest`): violators
    left over from earlier rounds, then points near the margin.  The uniform sample alone still decides when to
    test and the statistical test itself: the extra points only find violators sooner, so the stopping rule keeps
    its meaning.  Costs 4 bytes per point.
    """

    def __init__(self, m: int):
        self.slack = np.full(m, np.inf, dtype=np.float32)  # inf: never scored
        self.drawn = 0  # points drawn by the rounds so far

    def note(self, points: np.ndarray, slack: np.ndarray, n_drawn: int) -> None:
        """Record the slack of the points just scored, and the size of the round's uniform draw."""
        self.slack[points] = slack
        self.drawn += n_drawn

    def wanted(self, n_violators: int, n_drawn: int) -> bool:
        """Whether the next round should add near-margin points: the rounds have drawn as many points as there
        are, and the uniform draw's violators are fewer than :data:`NEAR_MARGIN_VIOLATORS` of it (earlier, slacks
        seen under a rough solution would bring in points that the next solve leaves out again)."""
        return self.drawn >= len(self.slack) and n_violators < NEAR_MARGIN_VIOLATORS * n_drawn

    def nearest(self, excluded: np.ndarray, candidates: np.ndarray, sample_size: int) -> np.ndarray:
        """The near-margin points that are neither ``excluded`` (a mask: the core set) nor among ``candidates``; at
        most :data:`NEAR_MARGIN_SHARE` times ``sample_size``, those with the smallest slack (in no order)."""
        limit = int(NEAR_MARGIN_SHARE * sample_size)
        near = np.flatnonzero((self.slack < NEAR_MARGIN_SLACK) & ~excluded)
        near = near[~np.isin(near, candidates, kind="table")]  # linear in m, where a sort costs m log m
        if len(near) > limit:
            near = near[np.argpartition(self.slack[near], limit)[:limit]]
        return near


def balanced_initial_points(y: np.ndarray, n_init: int, rng: np.random.RandomState) -> np.ndarray:
    """A small random subset with (as far as possible) equal numbers per class.

    The papers initialize from ~20 random points (Frandi et al. 2013 sec. 2.1 (b); the
    FW-SVM code balances them by class).  Files like ijcnn1 are ordered, so
    the subset is drawn at random, never the first rows.
    """
    labels = np.unique(y)
    per_class = max(1, n_init // len(labels))
    if len(y) > SWEEP_MAX_POINTS:
        return _balanced_draws(y, labels, per_class, rng)
    chosen = []
    for label in labels:
        members = np.flatnonzero(y == label)
        take = min(per_class, len(members))
        chosen.append(rng.choice(members, size=take, replace=False))
    return np.sort(np.concatenate(chosen)).astype(np.int64)


def _balanced_draws(y: np.ndarray, labels: np.ndarray, per_class: int, rng) -> np.ndarray:
    """``balanced_initial_points`` without index lists of length m (large problems).

    Random distinct points are drawn and kept per class until every class has
    ``per_class`` (or all its members); a class still short after 64 draws
    (a rare class) is completed from its member list, which is then short.
    """
    chosen = {label: np.zeros(0, dtype=np.int64) for label in labels}
    for _ in range(64):
        short = [label for label in labels if len(chosen[label]) < per_class]
        if not short:
            break
        draws = draw_distinct(rng, len(y), 4 * per_class * len(labels))
        for label in short:
            fresh = np.setdiff1d(draws[y[draws] == label], chosen[label])
            chosen[label] = np.concatenate([chosen[label], fresh[: per_class - len(chosen[label])]])
    for label in labels:
        if len(chosen[label]) < per_class:
            members = np.setdiff1d(np.flatnonzero(y == label), chosen[label])
            take = min(per_class - len(chosen[label]), len(members))
            chosen[label] = np.concatenate([chosen[label], rng.choice(members, size=take, replace=False)])
    return np.sort(np.concatenate(list(chosen.values()))).astype(np.int64)


def strata(y: np.ndarray, stratified: bool) -> tuple[np.ndarray, np.ndarray]:
    """The fair draws' class index: ``(ptr, order)`` with class ``k``'s points at ``order[ptr[k]:ptr[k + 1]]``;
    one stratum (uniform draws) unless ``stratified``."""
    if not stratified:
        return np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    order = np.argsort(y, kind="stable").astype(np.int64)
    _, counts = np.unique(y, return_counts=True)
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return ptr, order


@njit(cache=True)
def draw_candidates(m, n, strata_ptr, strata_order, out):
    """Fill ``out[:n]`` with candidate indices.

    Uniform with replacement when ``strata_ptr`` has length < 3; otherwise
    gsvm's "fair" sampling: first a class (stratum) uniformly, then a point of
    that class (Strack 2013, option -s).
    """
    n_strata = strata_ptr.shape[0] - 1
    if n_strata < 2:
        for c in range(n):
            out[c] = np.random.randint(0, m)
        return
    for c in range(n):
        k = np.random.randint(0, n_strata)
        lo = strata_ptr[k]
        out[c] = strata_order[lo + np.random.randint(0, strata_ptr[k + 1] - lo)]


def draw_points(rng: np.random.RandomState, m: int, n: int, strata_ptr: np.ndarray, strata_order: np.ndarray):
    """``n`` candidates: uniform, or gsvm's "fair" draw (a class, then a point of it) -- :func:`draw_candidates`'s
    distribution, from NumPy's generator (the gsvm family's block search)."""
    n_strata = strata_ptr.shape[0] - 1
    if n_strata < 2:
        return rng.randint(0, m, size=n)
    k = rng.randint(0, n_strata, size=n)
    lo, size = strata_ptr[k], strata_ptr[k + 1] - strata_ptr[k]
    return strata_order[lo + (rng.random_sample(n) * size).astype(np.int64)]


@njit(cache=True, nogil=True)
def balanced_start(y, n_init, seed):
    """Sorted positions of about ``n_init`` random points, as many of each sign as possible (at most
    ``n_init // (number of signs)`` each) -- the engine's class-balanced start (Frandi et al. 2013 sec. 2.1 (b);
    :func:`balanced_initial_points`), drawn here by Numba's generator seeded with
    ``seed``: NumPy's ``RandomState(seed)`` costs ~0.2 ms of GIL-held time per sub-problem."""
    np.random.seed(seed)  # this thread's Numba generator only
    m = y.shape[0]
    n_positive = 0
    for i in range(m):
        if y[i] > 0:
            n_positive += 1
    n_signs = (n_positive > 0) + (n_positive < m)
    per_class = max(1, n_init // n_signs)
    chosen = np.empty(0, dtype=np.int64)
    for sign in (-1.0, 1.0):  # np.unique's order, as balanced_initial_points
        members = np.flatnonzero(y == sign)
        take = min(per_class, members.shape[0])
        for k in range(take):  # partial Fisher-Yates: take distinct members uniformly
            j = k + np.random.randint(0, members.shape[0] - k)
            members[k], members[j] = members[j], members[k]
        chosen = np.concatenate((chosen, members[:take]))
    return np.sort(chosen)
