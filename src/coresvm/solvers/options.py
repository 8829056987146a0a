"""The settings of one solver run, grouped by the part of the solver that reads them.

A run's options are a few small records, one per part (as Falkon's ``FalkonOptions``
composes per-part options), composed into :class:`SolverOptions`:

=====================  ==============================================================
group                  part of the solver
=====================  ==============================================================
``memory``             kernel-column cache and the core set's Gram matrix
``step``               the step rule and its second vertex (steps.py, engine.py)
``search``             vertex search: candidates, sampling, seed, start
``stop``               stopping rule and limits (gap ``tol``, MEB radius, eps stages)
``core_set_loop``      the core-set outer loop (core_set.py)
``ball``               the gsvm family's ball solvers (geometric.py)
``report``             progress lines, traces and the callback
=====================  ==============================================================

Every field of every group can also be read (and given to the constructor or to
:func:`dataclasses.replace`) by its own name, ``options.tol`` for
``options.stop.tol``: the field names are unique across the groups, and the solver
loops read them so.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from .geometric import MAX_CORE_VECTORS


@dataclass
class MemoryOptions:
    """Memory for kernel values: the LRU column cache and the core set's Gram matrix."""

    cache_bytes: int = 200 * 2**20
    core_set_bytes: int | None = None  # the core set's Gram budget (None: cache_bytes)


@dataclass
class StepOptions:
    """The step rule (Frank-Wolfe toward/away/pairwise, PARTAN, MDM) and how it picks its second vertex."""

    step_rule: str = "swap"
    second_vertex: str = "mdm"
    gmdm_k: float = 0.5
    eta: float = 1.0  # over-relaxation of every line-search step (Strack 2013 eq. 5.6)


@dataclass
class SearchOptions:
    """The vertex search and the random draws: ``sample_size = 0`` is the deterministic full-gradient search."""

    sample_size: int = 0
    stratified: bool = False  # gsvm's "fair" draw: a class first, then a point of it
    seed: int = 0
    n_init: int = 20  # points of the class-balanced random start
    draws: int = 600  # gsvm family: random points tried per iteration
    probe: int = 1  # candidates per try of the violator search (BVM: 59)
    block_search: bool = True  # score violator candidates in BLAS blocks (dense data, or CSR within budget)


@dataclass
class StopOptions:
    """When a run ends: the relative gap ``tol``, the (1 + eps)-ball tests and the limits."""

    tol: float = 1e-3
    max_iter: int = 10_000_000
    max_time: float = np.inf
    radius_test: bool = False  # CVM, FW with stopping='meb': stop by the (1 + eps)-ball test (needs lam = 1), not tol
    stopping: str = "adjmn"  # gsvm family's rule: 'mn', 'adjmn' or 'meb'
    eps: float | None = None  # None: gsvm's default for the stopping rule
    multiscale: bool = True  # eps = 1/2, 1/4, ... down to eps (Strack 2013, Alg. 5)


@dataclass
class CoreSetLoopOptions:
    """The core-set outer loop (CVM-style, solvers/core_set.py) and its inner solve."""

    core_set: bool = False  # whether the run has this outer loop
    n_candidates: int = 59
    # With sweep_rounds, a round scores at least m / sweep_rounds candidates, so a sweep of the points takes at
    # most that many rounds (each a re-solve of the core set) however large m is; the test sample of the
    # statistical stop keeps n_candidates, so its cost does not grow with m.  0: n_candidates per round.
    sweep_rounds: int = 0
    max_add: int = 1
    growth: float = 0.0  # a round adds up to max(max_add, growth * |active|) violators
    core_set_stop: str = "quiet"  # 'quiet' (CVM: two clean samples) or 'sample' (the statistical rule)
    violator_fraction: float = 1e-3  # 'sample': the fraction of points allowed to violate by more than tol
    inner_steps_per_point: int = 1000
    # While a sample finds violators the core set is solved to this fraction of the outer relative gap.  0.05
    # against 0.1, over three seeds: ijcnn1 at C = 256 took 26-30 rounds against 38-52 (1.65-1.79 s against
    # 2.46-3.12 s), a9a at C = 4 4.4-5.3 s against 4.7-6.1 s.  The points that joined get weight before the next
    # round scores candidates against the solution, instead of being compacted away and found again.
    inner_gap_ratio: float = 0.05


@dataclass
class BallOptions:
    """The gsvm family's solvers (solvers/geometric.py)."""

    ball_rule: str = ""  # 'bvm', 'sphere' or 'mnsvm'; '' for the engine / core-set solvers
    track_every_point: bool = True  # SphereSVM/MNSVM on small problems: keep every point's g (tracks_every_point)
    max_core_vectors: int = MAX_CORE_VECTORS  # BVM: the most SVs (LibCVM's -f)
    track_after: int | None = None  # BVM: #SV from which g of every point is kept (None: bvm_track_after)


@dataclass
class ReportOptions:
    """What a run tells while it runs."""

    verbose: float = 0.0  # seconds between progress lines (0: none)
    trace_length: int = 0  # iterations of the relative-gap trace kept
    # core-set solvers: called once per outer round with an info dict; True stops the run
    # (status 'callback'). The compiled engine loops cannot call it (see CoreSVC's callback).
    callback: object = None


GROUPS = {"memory": MemoryOptions, "step": StepOptions, "search": SearchOptions, "stop": StopOptions,
          "core_set_loop": CoreSetLoopOptions, "ball": BallOptions, "report": ReportOptions}
# field name -> the group that holds it
FIELD_GROUP = {field.name: group for group, kind in GROUPS.items() for field in fields(kind)}


@dataclass(init=False)
class SolverOptions:
    """Knobs of one solver run (the estimator fills these from its parameters), one small record per part.

    ``SolverOptions(stop=StopOptions(tol=1e-6), step=StepOptions(step_rule='fw'))`` and
    ``SolverOptions(tol=1e-6, step_rule='fw')`` are the same options: a field given by name
    replaces that field of its group.  Every field reads by name as well (``options.tol``).
    """

    memory: MemoryOptions
    step: StepOptions
    search: SearchOptions
    stop: StopOptions
    core_set_loop: CoreSetLoopOptions
    ball: BallOptions
    report: ReportOptions

    def __init__(self, memory: MemoryOptions | None = None, step: StepOptions | None = None,
                 search: SearchOptions | None = None, stop: StopOptions | None = None,
                 core_set_loop: CoreSetLoopOptions | None = None, ball: BallOptions | None = None,
                 report: ReportOptions | None = None, **by_name):
        given = {"memory": memory, "step": step, "search": search, "stop": stop, "core_set_loop": core_set_loop,
                 "ball": ball, "report": report}
        unknown = sorted(set(by_name) - set(FIELD_GROUP))
        if unknown:
            raise TypeError(f"SolverOptions has no field {unknown[0]!r}")
        for group, kind in GROUPS.items():
            changes = {name: value for name, value in by_name.items() if FIELD_GROUP[name] == group}
            record = given[group] if given[group] is not None else kind()
            object.__setattr__(self, group, replace(record, **changes))  # a copy: groups are never shared

    def __getattr__(self, name: str):
        # only reached for names that are not attributes: the fields of the groups
        group = FIELD_GROUP.get(name)
        if group is None or group not in self.__dict__:
            raise AttributeError(f"{type(self).__name__!s} has no attribute {name!r}")
        return getattr(self.__dict__[group], name)

    def __setattr__(self, name: str, value) -> None:
        group = FIELD_GROUP.get(name)
        if group is not None:
            setattr(getattr(self, group), name, value)
        else:
            object.__setattr__(self, name, value)
