"""Cold start: time the first multiclass, binary and CSR fits with an empty Numba cache.

Run as ``python benchmarks/cold_start.py [--warm] [--table N]``. Unless ``NUMBA_CACHE_DIR`` is
already set (or ``--installed`` is given: Numba's default cache, e.g. what an installed wheel
ships), it points Numba at a fresh temporary directory so every compiled loop that the fits
need is compiled in this process (cold). A listener on Numba's ``numba:compile`` event
records each compilation: function, type signature, inclusive seconds, and self seconds (the
inclusive time less that of the nested compilations it triggered).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import defaultdict

# --installed: Numba's own cache locations (the package's __pycache__, which a wheel built by setup.py fills).
if "NUMBA_CACHE_DIR" not in os.environ and "--installed" not in sys.argv:
    os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="coresvm-cold-")

from numba.core import event  # noqa: E402


class CompileRecorder(event.Listener):
    """Per-signature compile times from the nested ``numba:compile`` events."""

    def __init__(self) -> None:
        self.stack: list[list] = []
        self.records: list[tuple[str, str, float, float]] = []
        self.label = ""
        self.labels: list[str] = []

    def on_start(self, ev: event.Event) -> None:
        self.stack.append([ev.data, time.perf_counter(), 0.0])

    def on_end(self, ev: event.Event) -> None:
        data, t0, children = self.stack.pop()
        dt = time.perf_counter() - t0
        if self.stack:
            self.stack[-1][2] += dt
        disp = data["dispatcher"]
        name = f"{disp.py_func.__module__}.{disp.py_func.__qualname__}"
        self.records.append((name, str(tuple(data["args"])), dt, dt - children))
        self.labels.append(self.label)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--table", type=int, default=15, help="rows of the compile table")
    parser.add_argument("--warm", action="store_true", help="also time the same fits again, warm")
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--installed", action="store_true", help="keep Numba's default cache locations")
    parser.add_argument("--dump", help="write every compile record (fit, function, signature, seconds) as JSON here")
    args = parser.parse_args()

    recorder = CompileRecorder()
    event.register("numba:compile", recorder)

    t_import = time.perf_counter()
    import numpy as np
    import scipy.sparse as sp
    from sklearn.datasets import make_classification

    from coresvm import CoreSVC

    t_import = time.perf_counter() - t_import

    X3, y3 = make_classification(args.n, 20, n_informative=5, n_classes=3, random_state=0)
    X2, y2 = make_classification(args.n, 20, n_informative=5, random_state=0)
    fits = [("multiclass", X3, y3), ("binary", X2, y2), ("csr", sp.csr_matrix(X2), y2)]
    import coresvm

    cache = os.environ.get("NUMBA_CACHE_DIR", "(unset)")
    print(f"coresvm from {os.path.dirname(coresvm.__file__)}, NUMBA_CACHE_DIR={cache}, import: {t_import:.2f} s")
    total = 0.0
    for label, X, y in fits:
        n0 = len(recorder.records)
        recorder.label = label
        t = time.perf_counter()
        model = CoreSVC().fit(X, y)
        dt = time.perf_counter() - t
        total += dt
        comp = sum(r[3] for r in recorder.records[n0:])
        print(
            f"cold {label:10s} fit {dt:7.2f} s  (compiling {comp:6.2f} s, {len(recorder.records) - n0} "
            f"signatures)  train acc {model.score(X, y):.3f}"
        )
    print(f"cold total {total:.2f} s")
    if args.warm:
        for label, X, y in fits:
            best = np.inf
            for _ in range(3):
                t = time.perf_counter()
                CoreSVC().fit(X, y)
                best = min(best, time.perf_counter() - t)
            print(f"warm {label:10s} fit {best:7.3f} s (best of 3)")

    event.unregister("numba:compile", recorder)
    if args.dump:
        import json

        with open(args.dump, "w") as f:
            json.dump([[lab, *r] for lab, r in zip(recorder.labels, recorder.records, strict=True)], f, indent=0)
    by_sig: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    per_func: dict[str, int] = defaultdict(int)
    for name, sig, incl, self_t in recorder.records:
        by_sig[name, sig][0] += incl
        by_sig[name, sig][1] += self_t
        per_func[name] += 1
    rows = sorted(by_sig.items(), key=lambda kv: -kv[1][1])
    total_self = sum(v[1] for _, v in rows)
    print(f"\n{len(rows)} compiled signatures of {len(per_func)} functions, self time {total_self:.2f} s")
    print(f"{'self s':>7} {'incl s':>7}  function  signature")
    for (name, sig), (incl, self_t) in rows[: args.table]:
        print(f"{self_t:7.2f} {incl:7.2f}  {name}  {sig[:160]}")
    dups = {f: c for f, c in per_func.items() if c > 1}
    if dups:
        print("\nfunctions compiled for several signatures:")
        for f, c in sorted(dups.items(), key=lambda kv: -kv[1]):
            print(f"  {c}x {f}")
            for (name, sig), (_, self_t) in rows:
                if name == f:
                    print(f"       {self_t:6.2f} s  {sig[:200]}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
