"""The options train, cv and select share: SVM model, solver, data, cross-validation and model selection.

Short options follow both gsvm (Strack 2013, Appendix A) and LIBSVM's ``svm-train``;
:func:`coresvm.cli.settings.resolve` decides what a letter means.
"""

from __future__ import annotations

import argparse
import re

# gsvm's model-selection ranges (Appendix A): C in [2^-4, 2^10], gamma in [2^-10, 2^4], 8 values each.
GSVM_C_RANGE = (0.0625, 1024.0)
GSVM_GAMMA_RANGE = (0.0009765625, 16.0)
GSVM_RESOLUTION = 8
DEFAULT_FOLDS = 10


EPILOG_SHARED_LETTERS = """\
gsvm and LIBSVM letters
  Where gsvm and LIBSVM use one letter for two things, the value decides:
    -t sparse|dense            gsvm's matrix type      -t 0-3|linear|poly|rbf|sigmoid  LIBSVM's kernel type
    -b theoretic|nobias        gsvm's bias rule        -b 0                             LIBSVM: no probabilities
    -s simple|fair             gsvm's randomizer       -s 0                             LIBSVM: C-SVC
    -m grid|pattern            gsvm's model selection  -m MB                            LIBSVM's cache size
    -p mn                      gsvm's stop criterion   (LIBSVM's -p is epsilon-SVR: not supported)
  -d and -r are numbers in both: they are LIBSVM's degree and coef0, or with --gsvm gsvm's
  draw number and grid resolution.  The long options (--degree, --coef0, --draw-number,
  --resolution, ...) never depend on --gsvm.  --gsvm also gives what the command line leaves
  unset gsvm's defaults: --solver mnsvm -u allatonce -z mdm -s fair -m pattern.
  LIBSVM's -wLABEL WEIGHT sets a class weight; its -h 0|1 (shrinking) is accepted and has no
  effect (these solvers do not shrink).
"""


def add_svm_options(parser: argparse.ArgumentParser, ranges: bool) -> None:
    """The SVM model, solver and data option groups (``ranges``: also -C/-G, the upper ends of a grid)."""
    model = parser.add_argument_group("SVM model")
    c_help = "penalty C of the squared slacks (L2-SVM; not SVC's C, see the README's 'What C means here'); default 1"
    g_help = "RBF/poly/sigmoid gamma: a number or scale, auto, cvm (default scale)"
    if ranges:
        c_help += "; with a range, its lower end (default 0.0625 = 2^-4, as gsvm)"
        g_help += "; with a range, its lower end (default 2^-10, as gsvm)"
    model.add_argument("-c", "--C", "--c-low", dest="c_low", type=float, metavar="C", help=c_help)
    model.add_argument("-g", "--gamma", "--gamma-low", dest="gamma_low", metavar="GAMMA", help=g_help)
    if ranges:
        model.add_argument("-C", "--c-high", dest="c_high", type=float, metavar="C",
                           help="upper end of the C range (default 1024 = 2^10, as gsvm)")
        model.add_argument("-G", "--gamma-high", dest="gamma_high", type=float, metavar="GAMMA",
                           help="upper end of the gamma range (default 16 = 2^4, as gsvm)")
    model.add_argument("-t", dest="t_letter", metavar="TYPE",
                       help="kernel type 0-3 or linear|poly|rbf|sigmoid (LIBSVM), or matrix type sparse|dense (gsvm)")
    model.add_argument("--kernel", choices=["linear", "poly", "rbf", "sigmoid"], help="kernel (default rbf)")
    model.add_argument("-d", dest="d_letter", type=int, metavar="N",
                       help="polynomial degree (LIBSVM); with --gsvm the draw number (gsvm)")
    model.add_argument("--degree", type=int, help="degree of the poly kernel (default 3)")
    model.add_argument("-r", dest="r_letter", metavar="X",
                       help="coef0 (LIBSVM); with --gsvm the grid resolution (gsvm)")
    model.add_argument("--coef0", type=float, help="independent term of poly and sigmoid (default 0)")
    model.add_argument("-b", dest="b_letter", metavar="RULE",
                       help="bias rule theoretic|average|nobias (gsvm) or 0 (LIBSVM)")
    model.add_argument("--bias", choices=["theoretic", "nobias", "average"],
                       help="theoretic: b = sum_i alpha_i y_i (default); average: the KKT average over the SVs; "
                       "nobias: b = 0")
    model.add_argument("--class-weight", action="append", default=[], metavar="LABEL=W",
                       help="multiply C for one class (repeatable; LIBSVM: -wLABEL W), or 'balanced'")
    model.add_argument("-u", "--multiclass", choices=["pairwise", "allatonce", "onevsrest"],
                       help="multiclass: pairwise (one-vs-one, default), allatonce (gsvm's all-at-once machine, "
                            "multiclass='joint'; --solver mnsvm, sphere, coreset or cvm) or onevsrest")
    model.add_argument("-s", dest="s_letter", metavar="X",
                       help="violator randomizer simple|fair (gsvm) or SVM type 0 = C-SVC (LIBSVM)")

    solver = parser.add_argument_group("solver")
    solver.add_argument("--solver", choices=["coreset", "cvm", "bvm", "sphere", "mnsvm", "fw", "mfw", "swap", "partan"],
                        help="solver (default coreset; see the README's 'Which solver when')")
    solver.add_argument("--vertex-search", choices=["auto", "full", "random"],
                        help="FW family: scan all points or a random sample per step (CoreSVC's search=)")
    solver.add_argument("-e", "--epsilon", "--tol", dest="tol", metavar="TOL",
                        help="relative duality-gap tolerance, or 'default' (CoreSVC's 0.01)")
    solver.add_argument("-E", "--eta", type=float, help="over-relaxation factor in [1, 2) (default 1)")
    solver.add_argument("-z", "--optimization", "--second-vertex", dest="selection",
                        choices=["mdm", "imdm", "gmdm"],
                        help="pairwise-step rule (default: mdm for swap, the paper's SWAP; imdm otherwise)")
    solver.add_argument("-k", "--gmdm-k", type=float, help="exponent of the gmdm rule in [0, 1] (default 0.5)")
    solver.add_argument("--draw-number", type=int, metavar="N",
                        help="candidates per violator search: sample_size (FW random search) and n_candidates "
                        "(core-set solvers); default: the solver's own")
    solver.add_argument("--sample-size", type=int, help="FW random search: candidates per iteration (194)")
    solver.add_argument("--n-candidates", type=int, help="core-set solvers: points scored per round")
    solver.add_argument("--batch-size", type=int, help="core-set solvers: most points added per round")
    solver.add_argument("--n-init", type=int, help="size of the random starting subset (20)")
    solver.add_argument("--max-iter", type=int, help="iteration cap per binary problem")
    solver.add_argument("--max-time", type=float, metavar="S", help="time budget in seconds per fit")
    solver.add_argument("-S", "--cache-size", type=float, metavar="MB", help="kernel cache / core-set memory (200)")
    solver.add_argument("-m", dest="m_letter", metavar="X",
                        help="model selection grid|pattern (gsvm) or cache size in MB (LIBSVM)")
    solver.add_argument("-p", "--stop-criterion", dest="p_letter", metavar="RULE",
                        help="stopping rule of bvm/sphere/mnsvm: mn|adjmn|meb (default: meb for bvm and sphere, "
                        "adjmn for mnsvm); meb also for fw/mfw/swap/partan (Frandi et al. 2013's (1+eps)-ball "
                        "test); -e sets its eps")
    solver.add_argument("--seed", type=int, default=0, help="random seed (default 0: runs are reproducible)")
    solver.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="set any CoreSVC parameter (repeatable), e.g. --param n_init=40")
    solver.add_argument("--verbose", action="store_true", help="print the solver's progress lines")
    solver.add_argument("--gsvm", action="store_true",
                        help="gsvm's command line: -d and -r take gsvm's meanings (draw number, resolution), and what "
                        "is not given takes gsvm's defaults: --solver mnsvm, -u allatonce, -z mdm, -s fair, "
                        "-m pattern")

    data = parser.add_argument_group("data")
    data.add_argument("--matrix-type", choices=["auto", "sparse", "dense"],
                      help="keep the data sparse (CSR) or dense; auto: LIBSVM files dense if half full (default)")
    data.add_argument("-I", "--input", metavar="FILE", help="the data file (gsvm's spelling; or give it as DATA)")
    data.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors (and no progress bar)")


def fold_count(args: argparse.Namespace) -> int:
    """Folds of the (inner) k-fold CV: -v or -i, else the default."""
    return args.v_folds or args.inner_folds or DEFAULT_FOLDS


def add_cv_options(parser: argparse.ArgumentParser, select: bool) -> None:
    """The cross-validation and model-selection options (``select``: without cv's outer folds)."""
    cv = parser.add_argument_group("cross-validation and model selection")
    cv.add_argument("-i", "--inner-folds", "--folds", dest="inner_folds", type=int, metavar="K",
                    help=f"folds of the (inner) k-fold CV (default {DEFAULT_FOLDS})")
    cv.add_argument("-v", dest="v_folds", type=int, metavar="K", help="k-fold CV (LIBSVM's spelling of -i)")
    if not select:
        cv.add_argument("-o", "--outer-folds", type=int, default=1, metavar="K",
                        help="outer folds of nested CV (default 1: none); needs a C or gamma range")
    cv.add_argument("--resolution", type=int, metavar="N",
                    help=f"values per axis of the grid, spaced geometrically (default {GSVM_RESOLUTION})")
    cv.add_argument("--log2c", metavar="BEGIN,END,STEP", help="grid.py style C grid: 2^BEGIN ... 2^END")
    cv.add_argument("--log2g", metavar="BEGIN,END,STEP", help="grid.py style gamma grid")
    cv.add_argument("--search", "--model-selection", dest="search", choices=["grid", "pattern"],
                    help="grid search (default) or gsvm's pattern search (PatternSearchCV)")
    cv.add_argument("-j", "--jobs", type=int, default=1, help="parallel fits (default 1; no progress bar if > 1)")


def preprocess_argv(argv: list[str]) -> list[str]:
    """Spellings argparse cannot take directly: LIBSVM's ``-wLABEL W`` and ``-h 0|1``, negative log2 ranges."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        match = re.fullmatch(r"-w(\S+)", token)
        if match and i + 1 < len(argv):
            out += ["--class-weight", f"{match.group(1)}={argv[i + 1]}"]
            i += 2
            continue
        if token in ("--log2c", "--log2g") and i + 1 < len(argv):
            out.append(f"{token}={argv[i + 1]}")  # a range like -5,15,2 would look like an option to argparse
            i += 2
            continue
        if token == "-h" and i + 1 < len(argv) and argv[i + 1] in ("0", "1"):
            i += 2  # LIBSVM's shrinking switch: nothing to shrink in these solvers
            continue
        out.append(token)
        i += 1
    return out
