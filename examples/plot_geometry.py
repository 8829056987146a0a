"""
==========================================================
The geometry: enclosing ball, minimal-norm point, core set
==========================================================

Every coresvm solver works on one quadratic program over the unit simplex,

.. math::

    \\min_{a}\\; a^\\top Q a - \\lambda\\, a^\\top \\mathrm{diag}(Q)
    \\quad \\text{s.t.}\\quad a \\ge 0,\\; \\textstyle\\sum_i a_i = 1,

with :math:`Q_{ij} = y_i y_j (k(x_i, x_j) + 1) + \\delta_{ij}/C_i`. The weights :math:`a` say
how much each point contributes to a *center* :math:`c = \\sum_i a_i \\varphi(x_i)`:

* :math:`\\lambda = 1` is the **minimum enclosing ball** (MEB) of the points: CVM, BVM and
  SphereSVM (Tsang et al. 2005 and Strack 2013) grow a ball around a few points until it covers all others.
* :math:`\\lambda = 0` is the **minimal-norm point** (MNP) of their convex hull: the
  Frank-Wolfe family and MNSVM (Frandi et al. 2013, Frandi et al. 2015 and Strack 2013) move a
  point inside the hull toward the origin.

For the RBF kernel, :math:`\\mathrm{diag}(Q)` is constant and both problems have the same
solution. The points with :math:`a_i > 0` form the **core set**; they are the support vectors.
A core set is small: a :math:`(1+\\varepsilon)`-approximate ball needs at most
:math:`2/\\varepsilon` points whatever the number of data points (Tsang et al. 2005).

The feature space of a real kernel cannot be drawn, so this example uses the same solver
(``coresvm.solvers.driver.run_engine``) on points in the plane with the linear kernel, where
the ball and the hull are what you see. The third panel is a real RBF ``CoreSVC`` on 2-D data,
where the core set is drawn in input space.
"""

# %%
# Set-up: two small 2-D problems with the linear kernel and (almost) no ridge
# ----------------------------------------------------------------------------
# ``bias=False`` and a huge ``C`` make :math:`Q` the plain Gram matrix :math:`x_i^\top x_j`
# (with the labels folded in), so the solver's center lives in the plane.
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Circle, Polygon
from scipy.spatial import ConvexHull

from coresvm import CoreSVC
from coresvm.kernels import KernelSpec
from coresvm.problem import SimplexProblem
from coresvm.solvers.driver import SolverOptions, run_engine

rng = np.random.default_rng(3)


def plane_problem(points, lam):
    """Q = points @ points.T: the MEB (lam=1) or MNP (lam=0) problem of points in the plane."""
    m = len(points)
    return SimplexProblem(points, np.ones(m), np.full(m, 1e12), KernelSpec("linear"), bias=False, lam=lam)


def solve(problem, rule, n_iter=None):
    """Run a solver; with n_iter, stop after that many iterations (the same seeded start)."""
    options = SolverOptions(step_rule=rule, tol=1e-9, n_init=2, seed=1)
    if n_iter is not None:
        options.max_iter = n_iter
    result = run_engine(problem, options)
    return result.support, result.alpha


# %%
# (a) The minimum enclosing ball and its core set
# -----------------------------------------------
# The Frank-Wolfe iterates of the MEB problem move the center toward the furthest point
# (Badoiu-Clarkson / Frandi et al. 2013 Alg. 2). We record the center after each of the first 25 steps.
cloud = rng.normal(size=(60, 2)) * [1.2, 1.0]
meb = plane_problem(cloud, lam=1.0)
support, alpha = solve(meb, "mfw")
center = alpha @ cloud[support]
radius = np.sqrt(np.max(np.sum((cloud - center) ** 2, axis=1)))
path = []
for k in range(25):
    s, a = solve(meb, "fw", n_iter=k)
    path.append(a @ cloud[s])
path = np.array(path)

# %%
# (b) The minimal-norm point of the reflected classes
# ---------------------------------------------------
# For a classifier through the origin, the points are :math:`z_i = y_i x_i`. The minimal-norm
# point :math:`w` of their convex hull is the hard-margin normal vector; the points that carry
# weight are the support vectors, and :math:`w^\top x = 0` separates the classes.
along, across = np.array([1.0, -1.0]) / np.sqrt(2), np.array([1.0, 1.0]) / np.sqrt(2)


def elongated(n, middle):
    return middle + np.outer(rng.normal(size=n) * 0.9, along) + np.outer(rng.normal(size=n) * 0.3, across)


positive = elongated(30, [1.6, 1.4])
negative = elongated(30, [-1.4, -1.6])
X_lin = np.vstack([positive, negative])
y_lin = np.r_[np.ones(30), -np.ones(30)]
reflected = y_lin[:, None] * X_lin
mnp = plane_problem(reflected, lam=0.0)
mnp_support, mnp_alpha = solve(mnp, "swap")
w = mnp_alpha @ reflected[mnp_support]

# %%
# (c) The core set of an RBF CoreSVC
# ----------------------------------
# On real data the core set is a small subset of the training points: here the support
# vectors of a ``CoreSVC`` on two interleaved half-moons.
from sklearn.datasets import make_moons  # noqa: E402

X_moons, y_moons = make_moons(n_samples=600, noise=0.15, random_state=0)
model = CoreSVC(C=1024, gamma=2.0, random_state=0).fit(X_moons, y_moons)

# %%
# The figure
# ----------
fig, axes = plt.subplots(1, 3, figsize=(15, 5))

ax = axes[0]
ax.scatter(*cloud.T, s=14, color="0.55", label="points")
ax.scatter(*cloud[support].T, s=80, facecolors="none", edgecolors="C3", linewidths=2,
           label=f"core set ({len(support)} points)")
ax.add_patch(Circle(center, radius, fill=False, color="C3"))
ax.plot(*path.T, "-o", ms=3, color="C0", label="FW centers, first 25 steps")
ax.plot(*center, "x", color="C3", ms=10, mew=2)
ax.set_title("(a) minimum enclosing ball ($\\lambda = 1$)")
ax.set_aspect("equal")
ax.legend(loc="lower left", fontsize=8)

ax = axes[1]
hull = ConvexHull(reflected)
ax.add_patch(Polygon(reflected[hull.vertices], closed=True, alpha=0.15, color="C0", label="hull of $y_i x_i$"))
ax.scatter(*positive.T, s=14, color="C0", label="class +1 ($z = x$)")
ax.scatter(*(-negative).T, s=14, color="C1", label="class -1 reflected ($z = -x$)")
ax.scatter(*negative.T, s=14, color="C1", alpha=0.3, label="class -1 as given")
ax.scatter(*reflected[mnp_support].T, s=80, facecolors="none", edgecolors="C3", linewidths=2,
           label=f"support ({len(mnp_support)} points)")
ax.annotate("", xy=w, xytext=(0, 0), arrowprops={"arrowstyle": "->", "color": "C3", "lw": 2})
ax.plot(0, 0, "k+", ms=10)
t = np.linspace(-4, 4, 2)
normal = np.array([-w[1], w[0]]) / np.linalg.norm(w)
ax.plot(t * normal[0], t * normal[1], "k--", lw=1, label="$w^T x = 0$")
ax.set_title("(b) minimal-norm point $w$ ($\\lambda = 0$)")
ax.set_aspect("equal")
ax.set_xlim(-4, 4.5)
ax.set_ylim(-4, 4.5)
ax.legend(loc="lower right", fontsize=7)

ax = axes[2]
xx, yy = np.meshgrid(np.linspace(-1.5, 2.5, 200), np.linspace(-1.0, 1.5, 150))
score = model.decision_function(np.c_[xx.ravel(), yy.ravel()]).reshape(xx.shape)
ax.contourf(xx, yy, score, levels=[-1e9, 0, 1e9], colors=["C1", "C0"], alpha=0.15)
ax.contour(xx, yy, score, levels=[-1, 0, 1], colors="k", linestyles=["--", "-", "--"], linewidths=1)
ax.scatter(*X_moons.T, c=np.where(y_moons == 1, "C0", "C1"), s=8)
sv = model.support_vectors_
ax.scatter(*sv.T, s=50, facecolors="none", edgecolors="C3", linewidths=1.5,
           label=f"core set / SVs ({len(sv)} of {len(X_moons)})")
ax.set_title("(c) RBF CoreSVC: the core set in input space")
ax.legend(loc="lower right", fontsize=8)
fig.tight_layout()
plt.show()

# %%
# What to read off the figure
# ---------------------------
# * (a) Only the few points on the ball's boundary carry weight; every other point could be
#   removed without changing the ball. The FW centers zig-zag toward the final center, which
#   is why the away, pairwise (SWAP) and PARTAN steps of Frandi et al. 2013 and 2015 help.
# * (b) The minimal-norm point is a combination of one or a few extreme points of the reflected
#   classes; its direction is the normal of the maximum-margin line through the origin.
# * (c) With the RBF kernel the same happens in feature space: the model depends only on the
#   core set, a small share of the data near the class boundary.
print(f"(a) core set: {len(support)} of {len(cloud)} points, radius {radius:.3f}")
print(f"(b) support: {len(mnp_support)} of {len(X_lin)} points, ||w|| = {np.linalg.norm(w):.3f}")
print(f"(c) support vectors: {len(sv)} of {len(X_moons)}, training accuracy {model.score(X_moons, y_moons):.3f}")
