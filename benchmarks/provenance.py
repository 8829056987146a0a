"""Where a benchmark's figures come from: the revision measured, the machine, the libraries.

Every script that writes to ``benchmarks/results`` puts these in its header, so that a figure can be traced to
the code and the machine that produced it.
"""

from __future__ import annotations

import mmap
import os
import platform
import subprocess
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
LIBRARIES = ("numpy", "scipy", "numba", "scikit-learn", "scikit-learn-intelex", "coresvm")


def git_revision() -> str:
    """The short commit of the repository, with '+dirty' for uncommitted changes to tracked files outside
    ``benchmarks/results`` (the results that one script of a batch writes are not changes to the code that the
    next one measures); 'unknown' outside a git checkout."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                                text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":!benchmarks/results"], cwd=REPO_ROOT, capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


def machine() -> str:
    """Architecture, CPU model (Linux), cores and Python: machines differ, and so do the seconds."""
    model = ""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "")
    except OSError:
        pass
    cpu = platform.machine() + (f" ({model})" if model else "")
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def library_versions(names: tuple[str, ...] = LIBRARIES) -> str:
    """'numpy 2.1.0, scipy ...': the installed version of each library, or '(not installed)'."""
    found = []
    for package in names:
        try:
            found.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            found.append(f"{package} (not installed)")
    return ", ".join(found)


PAGE_BYTES = 4096
GIB = 2**30


def first_touch_seconds_per_gib(mib: int = 256) -> float:
    """Seconds per GiB to write fresh anonymous memory once (a byte per 4 KiB page of a private mapping): what a
    large allocation such as a core set's Gram pays in page faults before any work.  On the 2-core VMs these
    benchmarks ran on it moves between ~0.2 and ~4.6 s: the host backs the guest's memory on first use and takes
    back what the guest has freed within about 30 s, so a fit that writes a 1.5 GB Gram (a9a) pays 0.6-7 s for it
    depending on what ran before.  Recorded with the results so that such runs can be told apart."""
    size = mib * 2**20
    mapping = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    pages = np.frombuffer(mapping, dtype=np.uint8)
    start = time.perf_counter()
    pages[::PAGE_BYTES] = 1
    seconds = time.perf_counter() - start
    del pages
    mapping.close()
    return seconds * GIB / size
