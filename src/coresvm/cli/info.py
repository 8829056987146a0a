"""``coresvm info``: describe a model file (native or LIBSVM)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .errors import UsageError


def add_parser(commands) -> None:
    """Add the ``info`` command to the ``commands`` subparsers."""
    parser = commands.add_parser("info", help="describe a model file", description="Describe a model file (native "
                                 "or LIBSVM): kernel, solver, classes, support vectors, bias rule, fit status.")
    parser.add_argument("model", metavar="MODEL", help="model file")
    parser.add_argument("--json", action="store_true", help="print the metadata as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the model's kernel, solver, classes, support vectors, bias rule and fit status (or JSON)."""
    from .. import model_io

    if not Path(args.model).exists():
        raise UsageError(f"file not found: {args.model}")
    metadata = model_io.read_metadata(args.model)
    model = model_io.load_model(args.model)
    summary = model_io.model_summary(model)
    if args.json:
        out = {key: metadata[key] for key in ("format", "format_version", "coresvm_version", "params")
               if key in metadata}
        out["summary"] = summary
        print(json.dumps(out, indent=1, default=str))
        return 0
    if metadata.get("format") == "libsvm":
        print(f"{args.model}: LIBSVM text model (C-SVC)")
    else:
        print(f"{args.model}: coresvm native model, format version {metadata['format_version']}, "
              f"written by coresvm {metadata.get('coresvm_version')}")
    kernel = summary["kernel"]
    kernel_text = {"linear": "linear <x, x'>", "rbf": f"rbf exp(-{summary['gamma']:g} ||x - x'||^2)",
                   "poly": f"poly ({summary['gamma']:g} <x, x'> + {summary['coef0']:g})^{summary['degree']}",
                   "sigmoid": f"sigmoid tanh({summary['gamma']:g} <x, x'> + {summary['coef0']:g})"}[kernel]
    rows = [
        ("kernel", kernel_text),
        ("classes", " ".join(map(str, summary["classes"]))),
        ("support vectors", f"{sum(summary['n_support']):,} ({' + '.join(map(str, summary['n_support']))}), "
                            f"{summary['support_vectors']}"),
        ("features", f"{summary['n_features']:,}"),
        ("bias", summary["bias_rule"]),
        ("multiclass", summary["multiclass"]),
    ]
    if metadata.get("format") != "libsvm":
        params = metadata.get("params", {})
        rows[1:1] = [("solver", f"{summary['solver']}, C = {summary['C']}, tol = {summary['tol']}")]
        other = {k: v for k, v in params.items() if k not in ("C", "tol", "solver", "kernel", "gamma", "degree",
                                                             "coef0")}
        rows.append(("fit status", "converged" if summary["fit_status"] == 0 else
                     f"stopped early ({', '.join(sorted(set(summary['statuses'])))})"))
        rows.append(("iterations", " ".join(map(str, summary["iterations"]))))
        rows.append(("other parameters", json.dumps(other, default=str)))
    for name, value in rows:
        print(f"  {name + ':':<18}{value}")
    return 0

