"""coresvm: kernel SVMs for large data by geometric simplex-QP solvers.

Public names only; see the module of each for details.
"""

from .svc import CoreSVC

__all__ = ["CoreSVC"]
__version__ = "0.1.0"
