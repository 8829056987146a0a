"""Where a benchmark's figures come from: the revision measured, the machine, the libraries.

Every script that writes to ``benchmarks/results`` puts these in its header, so that a figure can be traced to
the code and the machine that produced it.
"""

from __future__ import annotations

import os
import platform
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

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
