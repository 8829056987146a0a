"""Synthetic benchmark data and loaders for the shared benchmark files."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np


def make_checkerboard(n_samples: int, n_cells: int = 4, random_state: int | None = 0):
    """The CVM paper's checkerboard (Tsang et al. 2005, Sec. 5.1): uniform points on
    ``[0, n_cells)^2`` labelled +1/-1 by the parity of their cell.

    Returns ``X`` of shape (n_samples, 2) and ``y`` in {-1, +1}.
    """
    rng = np.random.default_rng(random_state)
    X = rng.uniform(0.0, n_cells, size=(n_samples, 2))
    parity = (np.floor(X[:, 0]) + np.floor(X[:, 1])).astype(np.int64) % 2
    return X, np.where(parity == 1, 1, -1)


def datasets_dir() -> Path:
    """Where the shared benchmark files live: ``$CORESVM_DATASETS`` or ``../shared/datasets``."""
    env = os.environ.get("CORESVM_DATASETS")
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / "shared" / "datasets"
        if candidate.is_dir():
            return candidate
    return Path.cwd().parent / "shared" / "datasets"
