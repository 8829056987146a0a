"""What the command line means: CoreSVC parameters from gsvm's and LIBSVM's letters, and the data file.

Where gsvm and LIBSVM use a letter differently, the value decides when it can (``-t
sparse`` is gsvm's matrix type, ``-t 2`` LIBSVM's kernel type; likewise ``-b``,
``-s``, ``-m`` and ``-p``).  Only ``-d`` and ``-r`` are numbers in both: they mean
LIBSVM's degree and coef0, and gsvm's draw number and grid resolution with ``--gsvm``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import numpy as np

from .errors import UsageError

KERNEL_TYPES = {"0": "linear", "1": "poly", "2": "rbf", "3": "sigmoid", "linear": "linear", "poly": "poly",
                "polynomial": "poly", "rbf": "rbf", "sigmoid": "sigmoid"}


def parse_number(text: str, what: str, kind=float):
    """``text`` as a finite float (or an int with ``kind=int``); a usage error naming ``what`` otherwise."""
    try:
        value = kind(text)
    except (TypeError, ValueError):
        raise UsageError(f"{what}: expected {'an integer' if kind is int else 'a number'}, got {text!r}") from None
    if kind is float and not math.isfinite(value):
        raise UsageError(f"{what}: expected a finite number, got {text!r}")
    return value


def _parse_param_value(text: str):
    """A --param value: JSON when it parses (numbers, true/false/null, lists, dicts), else the string."""
    try:
        return json.loads(text)
    except ValueError:
        return {"None": None, "True": True, "False": False}.get(text, text)


class Settings:
    """The resolved meaning of the command line: estimator parameters, data and CV settings."""

    def __init__(self) -> None:
        self.params: dict = {}
        self.matrix_type = "auto"
        self.resolution: int | None = None
        self.search: str | None = None
        self.class_weight: list[str] = []


def resolve(args: argparse.Namespace, command: str) -> Settings:
    """Turn parsed options into CoreSVC parameters, applying the gsvm/LIBSVM letter rules."""
    from .. import CoreSVC
    from ..svc_options import JOINT_SOLVERS

    s = Settings()
    p = s.params
    gsvm = getattr(args, "gsvm", False)
    if args.t_letter is not None:
        value = args.t_letter.lower()
        if value in ("sparse", "dense"):
            s.matrix_type = value
        elif value in KERNEL_TYPES:
            p["kernel"] = KERNEL_TYPES[value]
        elif value in ("4", "precomputed"):
            raise UsageError("-t 4: precomputed kernels are not supported")
        else:
            raise UsageError(f"-t takes a kernel type (0-3 or linear|poly|rbf|sigmoid) or a matrix type "
                             f"(sparse|dense); got {args.t_letter!r}")
    if args.matrix_type:
        s.matrix_type = args.matrix_type
    if args.kernel:
        p["kernel"] = args.kernel
    if args.d_letter is not None:
        if gsvm:  # gsvm's -d: the draws of the violator search, and the other solvers' candidate counts
            p["sample_size"] = p["n_candidates"] = p["draws"] = args.d_letter
        else:
            p["degree"] = args.d_letter
    if args.degree is not None:
        p["degree"] = args.degree
    if args.draw_number is not None:
        p["sample_size"] = p["n_candidates"] = p["draws"] = args.draw_number
    if args.r_letter is not None:
        if gsvm:
            s.resolution = parse_number(args.r_letter, "-r (resolution, --gsvm)", int)
        else:
            p["coef0"] = parse_number(args.r_letter, "-r (coef0)")
    if args.coef0 is not None:
        p["coef0"] = args.coef0
    for rule in filter(None, [args.b_letter, args.bias]):
        if rule == "theoretic":
            p["bias"] = True
        elif rule == "nobias":
            p["bias"] = False
        elif rule == "average":
            p["bias"] = "kkt"
        elif rule == "0":
            pass  # LIBSVM: no probability estimates, which is all there is
        elif rule == "1":
            p["probability"] = True  # LIBSVM's -b 1: Platt scaling
        else:
            raise UsageError(f"-b takes theoretic|nobias (gsvm) or 0 (LIBSVM); got {rule!r}")
    if args.multiclass is not None:
        p["multiclass"] = {"pairwise": "ovo", "allatonce": "joint", "onevsrest": "ovr"}[args.multiclass]
    known = CoreSVC().get_params(deep=False)
    if args.s_letter is not None:
        if args.s_letter == "simple":
            p["sampling"] = "uniform"  # gsvm's simple randomizer: uniform candidate draws
        elif args.s_letter == "0":
            pass  # LIBSVM's C-SVC: what coresvm does
        elif args.s_letter == "fair":
            p["sampling"] = "stratified"
        elif args.s_letter in ("1", "2", "3", "4"):
            raise UsageError(f"-s {args.s_letter}: only C-SVC (-s 0) is supported (no nu-SVC, one-class or SVR)")
        else:
            raise UsageError(f"-s takes simple|fair (gsvm) or 0 (LIBSVM); got {args.s_letter!r}")
    if args.m_letter is not None:
        if args.m_letter in ("grid", "pattern"):
            s.search = args.m_letter
        else:
            p["cache_size"] = parse_number(args.m_letter, "-m (cache size in MB, or grid|pattern)")
    if args.p_letter is not None:
        if args.p_letter not in ("mn", "adjmn", "meb"):
            raise UsageError(f"-p takes the stopping criterion mn|adjmn|meb (LIBSVM's -p, epsilon-SVR, is not "
                             f"supported); got {args.p_letter!r}")
        p["stopping"] = args.p_letter
    if args.cache_size is not None:
        p["cache_size"] = args.cache_size
    if args.tol is not None and args.tol != "default":
        p["tol"] = parse_number(args.tol, "-e (tolerance)")
        if p["tol"] < 1:
            p["eps"] = p["tol"]  # the eps of the stopping rule (bvm, sphere, mnsvm)
    for name in ("eta", "selection", "gmdm_k", "sample_size", "n_candidates", "batch_size", "n_init",
                 "max_iter", "max_time", "solver"):
        value = getattr(args, name)
        if value is not None:
            p[name] = value
    if args.vertex_search is not None:
        p["search"] = args.vertex_search
    p["random_state"] = args.seed
    if args.verbose:
        p["verbose"] = True
    s.class_weight = args.class_weight
    for item in args.param:
        name, sep, text = item.partition("=")
        if not sep:
            raise UsageError(f"--param takes NAME=VALUE; got {item!r}")
        p[name.strip()] = _parse_param_value(text.strip())
    unknown = sorted(set(p) - set(known))
    if unknown:
        raise UsageError(f"CoreSVC has no parameter {', '.join(unknown)}")
    if getattr(args, "resolution", None) is not None:
        s.resolution = args.resolution
    if getattr(args, "search", None) is not None:
        s.search = args.search
    if not gsvm and p.get("kernel", "rbf") in ("rbf", "linear") and (args.r_letter is not None) \
            and command in ("select", "cv") and not args.quiet:
        print(f"coresvm {command}: note: -r sets coef0 (LIBSVM), which the {p.get('kernel', 'rbf')} kernel ignores; "
              "for gsvm's grid resolution use --resolution or --gsvm", file=sys.stderr)
    if gsvm:
        apply_gsvm_defaults(p, s)
    if p.get("multiclass") == "joint" and p.get("solver", "coreset") not in JOINT_SOLVERS:
        raise UsageError(
            f"-u allatonce: the all-at-once machine (Strack 2013, sec. 5.4) is solved by --solver mnsvm, sphere, "
            f"coreset or cvm (the same problem and optimum); --solver {p['solver']} cannot solve it: its loop "
            "evaluates the extended kernel with binary labels y_i y_j, not the all-at-once problem's label inner "
            f"products. Use -u pairwise with --solver {p['solver']}"
        )
    # Check the parameters now, before a long data load, with the estimator's own messages.
    CoreSVC(**p).check_params()
    return s


# What --gsvm sets unless the command line says otherwise: gsvm's defaults (Strack 2013, Appendix A) where
# coresvm's differ -- MNSVM, all-at-once, the MDM second vertex, fair sampling, pattern search.  (Its stopping
# rule adjmn, eps 1e-3 and 600 draws are already mnsvm's defaults here.)
GSVM_DEFAULTS = {"solver": "mnsvm", "multiclass": "joint", "selection": "mdm", "sampling": "stratified"}
GSVM_SEARCH = "pattern"


def apply_gsvm_defaults(params: dict, settings: Settings) -> None:
    """Fill what the command line left unset with :data:`GSVM_DEFAULTS` and gsvm's pattern search.

    All-at-once is gsvm's default only with a solver that solves it (:data:`JOINT_SOLVERS`); with
    ``--solver bvm`` or a Frank-Wolfe solver the default stays pairwise.
    """
    from ..svc_options import JOINT_SOLVERS

    for name, value in GSVM_DEFAULTS.items():
        if name == "multiclass" and params.get("solver", GSVM_DEFAULTS["solver"]) not in JOINT_SOLVERS:
            continue
        params.setdefault(name, value)
    if settings.search is None:
        settings.search = GSVM_SEARCH


def gamma_value(text: str | None):
    """-g's value: None, a rule (scale, auto, cvm) or a positive number."""
    if text is None:
        return None
    if text in ("scale", "auto", "cvm"):
        return text
    value = parse_number(text, "-g (gamma, a number or scale|auto|cvm)")
    if value <= 0:
        raise UsageError(f"-g: gamma must be > 0; got {text}")
    return value


def set_single_point(args: argparse.Namespace, settings: Settings) -> None:
    """-c and -g, when given, as the estimator's C and gamma (the commands that fit one point)."""
    if args.c_low is not None:
        settings.params["C"] = args.c_low
    gamma = gamma_value(args.gamma_low)
    if gamma is not None:
        settings.params["gamma"] = gamma


def class_weight(items: list[str], y: np.ndarray):
    """--class-weight LABEL=W items as CoreSVC's class_weight, with labels matched to the data's."""
    if not items:
        return None
    if items == ["balanced"]:
        return "balanced"
    classes = np.unique(y)
    weights = {}
    for item in items:
        label_text, sep, weight_text = item.partition("=")
        if not sep:
            raise UsageError(f"class weight {item!r}: expected LABEL=WEIGHT (or 'balanced')")
        weight = parse_number(weight_text, f"class weight for {label_text}")
        match = [c for c in classes.tolist() if str(c) == label_text or _same_number(c, label_text)]
        if not match:
            raise UsageError(f"class weight for label {label_text}, which is not in the data "
                             f"(labels: {', '.join(map(str, classes.tolist()))})")
        weights[match[0]] = weight
    return weights


def _same_number(label, text: str) -> bool:
    try:
        return isinstance(label, (int, float)) and float(text) == float(label)
    except ValueError:
        return False


def data_path(args: argparse.Namespace) -> str:
    """The data file: the first positional argument, or gsvm's ``-I FILE`` (then a lone positional is the model)."""
    if args.input is not None and args.data is not None:
        if getattr(args, "model", "absent") is None:
            args.model, args.data = args.data, None
        elif args.data != args.input:
            raise UsageError(f"two data files given: {args.data} and -I {args.input}")
    path = args.data or args.input
    if path is None:
        raise UsageError("no data file given")
    return path


def make_estimator(settings: Settings, y, **overrides):
    """The CoreSVC of the command line, its class weights matched to the labels ``y``, with ``overrides``."""
    from .. import CoreSVC

    params = dict(settings.params)
    weights = class_weight(settings.class_weight, y)
    if weights is not None:
        params["class_weight"] = weights
    params.update(overrides)
    return CoreSVC(**params)

