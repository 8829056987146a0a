"""
=========================================
Pattern search and grid search: the paths
=========================================

``GridSearchCV`` cross-validates every point of the grid. ``PatternSearchCV`` (the "sparse grid
search" of Strack's thesis, Strack 2013, Algorithm 6, after Momma & Bennett 2002) walks a cross
pattern over the grid's indices instead: it evaluates the centre and one step up and down each
axis, moves to the best of them or halves the step when the centre is best, and stops when the
step reaches 0. It then restarts at the grid point farthest from every point evaluated so far.
Each point is cross-validated once, however often the walk meets it.

This example runs both searches over gsvm's 8 x 8 grid of ``C`` and ``gamma`` with scikit-learn's
``SVC`` on 600 checkerboard points and 3-fold cross-validation, and draws the pattern search's
path over the grid's cross-validation scores.
"""

# %%
# The two searches
# ----------------
# Both use the same folds, so a point evaluated by both searches gets the same score.
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.svm import SVC

from coresvm.datasets import make_checkerboard
from coresvm.model_selection import GSVM_PARAM_GRID, PatternSearchCV

X, y = make_checkerboard(600, random_state=0)
folds = StratifiedKFold(3, shuffle=True, random_state=0)
grid = GSVM_PARAM_GRID  # C = 4^-2 .. 4^5, gamma = 4^-5 .. 4^2
scores_size = len(grid["C"]) * len(grid["gamma"])
print("grid:", {name: [f"{v:g}" for v in values] for name, values in grid.items()})

start = time.perf_counter()
grid_search = GridSearchCV(SVC(), grid, cv=folds).fit(X, y)
grid_time = time.perf_counter() - start
grid_fits = len(grid_search.cv_results_["params"]) * grid_search.n_splits_

start = time.perf_counter()
pattern_search = PatternSearchCV(SVC(), grid, cv=folds, n_restarts=2).fit(X, y)
pattern_time = time.perf_counter() - start

for name, search, fits, seconds in [
    ("GridSearchCV", grid_search, grid_fits, grid_time),
    ("PatternSearchCV", pattern_search, pattern_search.n_fits_, pattern_time),
]:
    params = ", ".join(f"{k}={v:g}" for k, v in search.best_params_.items())
    print(f"{name:>15}: {fits:>3} fits, {seconds:.1f} s, best {params}, CV accuracy {search.best_score_:.4f}")
print(f"the pattern search evaluated {len(pattern_search.cv_results_['params'])} of {scores_size} grid points")

# %%
# The walk, step by step
# ----------------------
# ``search_path_`` has one entry per pattern step: the run (0 is the first walk, then the
# restarts), the centre, the index step, the points evaluated for the first time and what the
# walk did next. A restart ends ("joined") when it reaches ground an earlier walk has already
# searched with a score at least as good.
for entry in pattern_search.search_path_:
    centre = ", ".join(f"{k}={v:g}" for k, v in entry["center"].items())
    print(f"run {entry['run']}: centre ({centre}), step {entry['step']}, "
          f"{len(entry['new'])} new points -> {entry['action']}")

# %%
# Scores over the grid and the points the pattern search evaluated
# ----------------------------------------------------------------
# The heat map is the grid search's mean cross-validation accuracy. The numbers are the order in
# which the pattern search evaluated the points (``cv_results_`` rows are in evaluation order),
# coloured by run; the line joins the successive centres of each walk (a restart that ends at
# its first centre has none).
c_values, gamma_values = list(grid["C"]), list(grid["gamma"])


def grid_index(params: dict) -> tuple[int, int]:
    """(row, column) of a point in the heat map: row = C, column = gamma."""
    return c_values.index(params["C"]), gamma_values.index(params["gamma"])


scores = np.full((len(c_values), len(gamma_values)), np.nan)
for params, score in zip(grid_search.cv_results_["params"], grid_search.cv_results_["mean_test_score"], strict=True):
    scores[grid_index(params)] = score

fig, ax = plt.subplots(figsize=(8, 6.5))
image = ax.imshow(scores, origin="lower", cmap="viridis")
fig.colorbar(image, ax=ax, label="mean CV accuracy (grid search)")
ax.set_xticks(range(len(gamma_values)), [f"$4^{{{round(np.log(v) / np.log(4))}}}$" for v in gamma_values])
ax.set_yticks(range(len(c_values)), [f"$4^{{{round(np.log(v) / np.log(4))}}}$" for v in c_values])
ax.set_xlabel("gamma")
ax.set_ylabel("C")

run_colors = ["tab:red", "tab:orange", "tab:pink", "tab:cyan", "tab:olive", "tab:brown"]
run_of_point = {}
for entry in pattern_search.search_path_:
    for params in entry["new"]:
        run_of_point.setdefault(grid_index(params), entry["run"])
for run in sorted(set(run_of_point.values())):
    color = run_colors[run % len(run_colors)]
    centres = [grid_index(e["center"]) for e in pattern_search.search_path_ if e["run"] == run]
    rows, cols = zip(*centres, strict=True)
    ax.plot(cols, rows, "-", color=color, lw=3, alpha=0.8)
    label = "first walk" if run == 0 else f"restart {run}"
    ax.plot([], [], "o", ms=10, mfc=color, mec="k", label=label)  # legend entry only
for order, params in enumerate(pattern_search.cv_results_["params"], start=1):
    row, col = grid_index(params)
    ax.plot(col, row, "o", ms=18, mfc=run_colors[run_of_point[(row, col)] % len(run_colors)], mec="k")
    ax.text(col, row, str(order), ha="center", va="center", fontsize=9)

row, col = grid_index(grid_search.best_params_)
ax.plot(col, row, "*", ms=26, mfc="white", mec="k", mew=1.5, label="grid search optimum")
row, col = grid_index(pattern_search.best_params_)
ax.plot(col, row, "s", ms=27, mfc="none", mec="deepskyblue", mew=2.5, label="pattern search optimum")
ax.legend(loc="upper left", bbox_to_anchor=(0.0, -0.1), ncol=3, fontsize=9, markerscale=0.7)
ax.set_title(f"pattern search: {pattern_search.n_fits_} fits, grid search: {grid_fits} fits")
fig.tight_layout()
plt.show()

# %%
# Reading the figure
# ------------------
# The pattern search cross-validates a fraction of the grid (19 of 64 points in our run) and follows
# the rising scores, but it is a local search. Here its first walk jumps from the centre to the
# large-``gamma`` edge, then shrinks its step, and at step 1 no neighbour scores strictly better,
# so it stops at a local optimum about three points of accuracy below the grid's best, which lies
# inside the same high-scoring region (larger ``C``, smaller ``gamma``); with 600 points and 3
# folds the scores of neighbouring points differ by little more than noise. The restarts go to
# the unexplored corners of the grid; each soon meets ground the first walk already searched and
# ends. More restarts (``n_restarts``) trade fits for a better chance of finding the global
# optimum. On larger data, where each fit costs seconds rather than milliseconds, the saving in
# fits is what the pattern search is for.
