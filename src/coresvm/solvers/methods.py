"""Every paper's method as one named configuration of the engine's parts.

All methods solve the simplex QP ``min a'Qa - lam a'diag(Q)`` (ARCHITECTURE.md section 1); they differ
only in their parts:

* **step rule**: how the weights move once the vertices are chosen (FW toward, away, pairwise/SWAP,
  PARTAN, the BVM / SphereSVM ball steps, MDM's pairwise step of MNSVM);
* **vertex search**: how the toward vertex is found (full scan of the gradient, best of a random
  sample, first violator in a number of draws, uniform or class-stratified);
* **second vertex**: the away / partner vertex among the active points (MDM, IMDM, GMDM(k));
* **stopping rule**: the relative duality gap, the MEB ``(1 + eps)`` radius test, ``mn`` / ``adjmn``;
* **outer loop**: none, or core-set growth with a warm-started inner solve;
* **loop**: the compiled loop that runs the configuration (and the Python function that calls it).

:data:`METHODS` maps ``CoreSVC(solver=...)`` names to :class:`Method` records; the estimators read their
settings from it (``CoreSVC.solver_options``, ``CoreOneClassSVM``), so a method is configured in this one
place.  :data:`SECOND_VERTEX_METHODS` lists the ``selection`` choices, :data:`OTHER_SOLVES` the solves
that are not a ``solver=`` choice (AESVC's weighted problem).
"""

from __future__ import annotations

from dataclasses import dataclass

ENGINE, CORE_SET, BALL = "engine", "core_set", "ball"  # the three families of loops

# LibCVM's BVM violator search: the worst of 59 draws, up to 10 times (Strack 2013 sec. 2.8 / 5.1.2)
BVM_PROBE, BVM_TRIES = 59, 10
# The gsvm family's violator search: the first violator in up to 600 draws (Strack 2013 sec. 5.1.2)
GSVM_DRAWS = 600
# solver='coreset' adds up to max(max_add, CORE_SET_GROWTH x |active|) violators per round (core_set.solve_core_set)
CORE_SET_GROWTH = 1.0


@dataclass(frozen=True)
class Method:
    """One solver: its parts, the loop that runs it, and where it is defined."""

    name: str
    family: str  # ENGINE (driver.run_engine), CORE_SET (its outer loop), BALL (the gsvm family)
    step_rule: str  # engine.STEP_RULES key ('mdm': the pairwise MDM step) or a geometric.BALL_RULES key
    step: str  # the step rule in words
    vertex_search: str
    second_vertex: str  # default ``selection`` (engine.SECOND_VERTEX_RULES key)
    stopping: str
    outer_loop: str
    loop: str
    paper: str
    # -- the settings CoreSVC.solver_options gives the family's loop
    n_candidates: int = 59  # core set: candidates scored per round
    sweep_rounds: int = 0  # core set: rounds score at least m / sweep_rounds candidates (0: n_candidates)
    max_add: int = 1  # core set: violators added per round (at least)
    growth: float = 0.0  # core set: a round adds up to max(max_add, growth * |active|)
    core_set_stop: str = "quiet"  # core set: 'quiet' (two clean samples) or 'sample' (the statistical rule)
    radius_test: bool = False  # stop by the (1 + eps)-ball test of the current ball (needs lam = 1)
    ball_stopping: str = "meb"  # ball family: default geometric.STOPPING_RULES key
    draws: int = GSVM_DRAWS  # ball family: draws of the violator search
    probe: int = 1  # ball family: candidates per try of the violator search
    needs_constant_diagonal: bool = False  # a minimum enclosing ball: k~(x, x) must be constant
    second_vertex_note: str = ""  # when the step ignores ``selection``: what it does instead
    dense_fast_path: bool = False  # small in-memory problems run on solvers/dense.py (one compiled call)


def _frank_wolfe(name: str, step: str, second: str, paper: str, second_note: str = "") -> Method:
    return Method(
        name=name, family=ENGINE, step_rule=name, step=step, second_vertex=second, second_vertex_note=second_note,
        vertex_search="full scan of g (search='full'), or the best of sample_size random points",
        stopping="relative duality gap <= tol; stopping='meb': the (1 + eps)-ball test",
        outer_loop="none", loop="driver.run_engine -> engine.solve_simplex", paper=paper,
    )


METHODS: dict[str, Method] = {
    method.name: method
    for method in (
        Method(
            name="coreset", family=CORE_SET, step_rule="mdm", second_vertex="imdm",
            step="inner solve: pairwise MDM steps with the IMDM partner, warm-started each round; Newton steps on "
                 "the active face where the pairwise rate is slow (large C; Nocedal and Wright 2006, sec. 16.5), "
                 "large faces by Nystrom-preconditioned conjugate gradients",
            vertex_search="10,000 candidates per round, or m / 25 (a sweep of a random permutation), and late "
                          "rounds up to half as many points that last scored near the margin; the worst violators "
                          "join",
            stopping="statistical: at most violator_fraction of the points violate by more than tol, "
                     "at 95% confidence on a fresh uniform sample",
            outer_loop="core-set growth: up to max(300, |active|) violators per round, warm-started inner solve",
            loop="core_set.solve_core_set -> core_steps.inner_solve; small dense problems: dense.solve_rows_dense",
            paper="Tsang et al. 2005, sec. 4 (core-set growth, Badoiu-Clarkson), with the inner solve of "
                  "Strack 2013 sec. 5.6 (IMDM, eq. 5.33); batch growth and the statistical stop are coresvm's",
            n_candidates=10_000, sweep_rounds=25, max_add=300, growth=CORE_SET_GROWTH, core_set_stop="sample",
            dense_fast_path=True,
        ),
        Method(
            name="cvm", family=CORE_SET, step_rule="mdm", second_vertex="imdm",
            step="inner solve: the MEB of the core set by pairwise MDM steps (IMDM partner)",
            vertex_search="the furthest of 59 random points (the '59 trick')",
            stopping="the (1 + eps)-ball test: no sampled point outside (1 + eps) R",
            outer_loop="core-set growth: one point per round, warm-started inner solve",
            loop="core_set.solve_core_set -> core_steps.inner_solve",
            paper="Tsang et al. 2005, sec. 4 steps 1-5 (eq. 3 radius, eq. 5 inner MEB QP), sec. 4.1.2 (59 draws)",
            radius_test=True, needs_constant_diagonal=True,
        ),
        Method(
            name="bvm", family=BALL, step_rule="bvm", second_vertex="imdm",
            step="ball step: c moves toward x~_v until x~_v is on the sphere of radius R_hat",
            second_vertex_note="none (one-vertex step)",
            vertex_search="the worst of 59 draws, up to 10 tries (LibCVM)",
            stopping="meb: ||c - x~_v|| <= (1 + eps) R_hat, multiscale eps stages",
            outer_loop="none (multiscale eps schedule)",
            loop=("driver._run_ball -> geometric.solve_in_stages with geometric.BvmRun "
                  "(search: geometric.draw_violator)"),
            paper="Tsang et al. 2007 (Ball Vector Machines); Strack 2013 Alg. 2, Alg. 5 (multiscale)",
            draws=BVM_PROBE * BVM_TRIES, probe=BVM_PROBE, needs_constant_diagonal=True,
        ),
        Method(
            name="sphere", family=BALL, step_rule="sphere", second_vertex="imdm",
            step="two-vector step along x~_v - x~_u putting x~_v on the R_hat sphere, clipped at alpha_u",
            vertex_search="the first violator in up to 600 draws (uniform or fair)",
            stopping="meb (default), mn or adjmn; multiscale eps stages",
            outer_loop="none (multiscale eps schedule)",
            loop=("driver._run_ball -> geometric.solve_in_stages with geometric.DrawnBallRun (search: "
                  "geometric.draw_violator) or geometric.BlockBallRun (search: geometric.find_violator, BLAS blocks)"),
            paper="Strack 2013 Alg. 3 (SphereSVM step), sec. 5.6 (second vertex), Alg. 5 (multiscale)",
            needs_constant_diagonal=True,
        ),
        Method(
            name="mnsvm", family=BALL, step_rule="mnsvm", second_vertex="imdm",
            step="MDM step: exact line minimizer of ||c||^2 along x~_v - x~_u, clipped at alpha_u",
            vertex_search="the first violator in up to 600 draws (uniform or fair)",
            stopping="adjmn (default), mn or meb; multiscale eps stages",
            outer_loop="none (multiscale eps schedule)",
            loop=("driver._run_ball -> geometric.solve_in_stages with geometric.DrawnBallRun (search: "
                  "geometric.draw_violator) or geometric.BlockBallRun (search: geometric.find_violator, BLAS blocks)"),
            paper="Strack 2013 Alg. 4 (MDM step on the minimal-norm problem, eq. 5.31), sec. 2.10 (mn/adjmn)",
            ball_stopping="adjmn",
        ),
        _frank_wolfe("fw", "toward step with exact line search",
                     "imdm", "Frandi et al. 2013, Alg. 2 (FW for MEB-SVMs), sec. 4.1", "none (one-vertex step)"),
        _frank_wolfe("mfw", "toward or away step, whichever has the larger gap (away vertex: MDM)",
                     "imdm", "Frandi et al. 2013, Alg. 3 (MFW), sec. 4.2 (line 21's radius update has a sign typo)",
                     "mdm, always (the paper's away vertex)"),
        _frank_wolfe("swap", "toward or pairwise (SWAP) step, whichever decreases f more",
                     "mdm", "Frandi, Nanculef and Suykens 2015, sec. 2 (d_SW = u - v)"),
        _frank_wolfe("partan", "FW step, then a line search along alpha^(k-1) -> FW point",
                     "imdm", "Frandi, Nanculef and Suykens 2015, Alg. 2 (PARTAN-FW, eqs. 9-12)", "none (FW vertex)"),
    )
}

# ``selection``: the second (away / partner) vertex among the active points
SECOND_VERTEX_METHODS: dict[str, str] = {
    "mdm": "the active point with the largest gradient (Strack 2013 sec. 5.6, eq. 5.34)",
    "imdm": "the partner whose clipped pairwise step decreases f most (Franc 2005; Strack 2013 eq. 5.33)",
    "gmdm": "(score_j - score_i) / curvature^(k/2), k = gmdm_k (Strack 2013 eq. 5.35)",
}

# Solves that are not a ``solver=`` choice of CoreSVC: AESVM's representative set (Nandan et al. 2014) solves
# small simplex QPs on a segment's precomputed kernel block; its final weighted SVM is scikit-learn's SVC
# (the paper's LIBSVM SMO on eq. 18, sec. 4.4), not an engine solve.
OTHER_SOLVES: dict[str, Method] = {
    entry.name: entry
    for entry in (
        Method(
            name="aesvm-checkpoint", family="aesvm", step_rule="pairwise",
            step="pairwise FW step with exact line search, clipped at the away weight",
            vertex_search="full scan of the segment's candidates", second_vertex="mdm",
            stopping="decided (f - gap > eps: not covered; f <= eps: covered) or absolute gap",
            outer_loop="none",
            loop=("aesvm.check_point / aesvm.derive_ae -> core_steps.inner_solve (linear term, stop rule "
                  "STOP_COVERAGE)"),
            paper="Nandan et al. 2014, sec. 4.3 (CheckPoint, eq. 11); step: Frandi, Nanculef and Suykens 2015",
        ),
        Method(
            name="aesvm-sphereset", family="aesvm", step_rule="pairwise",
            step="pairwise FW step (solver='dense'), or the engine's 'swap' (solver='engine')",
            vertex_search="full scan", second_vertex="mdm", stopping="relative duality gap <= 1e-4",
            outer_loop="none",
            loop=("aesvm.sphere_set -> core_steps.inner_solve (lam = 1, stop rule STOP_RELATIVE_GAP), or "
                  "driver.run_engine"),
            paper="Nandan et al. 2014, sec. 4.3 step 1 (SphereSet: the segment's minimum enclosing ball)",
        ),
    )
}


def method(name: str) -> Method:
    """The :class:`Method` of ``solver=name`` (KeyError for an unknown name)."""
    return METHODS[name]


def names_in(family: str) -> tuple[str, ...]:
    """The solver names whose loop is ``family`` (ENGINE, CORE_SET or BALL)."""
    return tuple(name for name, entry in METHODS.items() if entry.family == family)


def selection_table_markdown() -> str:
    """:data:`SECOND_VERTEX_METHODS` as a markdown table."""
    rows = ["| selection | rule |", "|---|---|"]
    rows += [f"| `{name}` | {rule} |" for name, rule in SECOND_VERTEX_METHODS.items()]
    return "\n".join(rows)


def method_table_markdown() -> str:
    """:data:`METHODS` and :data:`OTHER_SOLVES` as a markdown table (the architecture page shows it)."""
    columns = ("name", "family", "step", "vertex_search", "second_vertex", "stopping", "outer_loop", "loop", "paper")
    rows = ["| " + " | ".join(column.replace("_", " ") for column in columns) + " |",
            "|" + "---|" * len(columns)]
    for entry in (*METHODS.values(), *OTHER_SOLVES.values()):
        cells = [str(getattr(entry, column)).replace("|", "\\|") for column in columns]
        cells[4] = entry.second_vertex_note or cells[4]
        cells[0], cells[7] = f"`{cells[0]}`", f"`{cells[7]}`"
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)
