"""coresvm: kernel SVMs for large data by geometric simplex-QP solvers.

Public names only; see the module of each for details.
"""

from .aesvc import AESVC
from .model_io import load_model, save_model
from .model_selection import PatternSearchCV, nested_cross_validate
from .oneclass import CoreOneClassSVM
from .svc import CoreSVC
from .warm_start import WarmStart

__all__ = [
    "AESVC",
    "CoreOneClassSVM",
    "CoreSVC",
    "PatternSearchCV",
    "WarmStart",
    "load_model",
    "nested_cross_validate",
    "save_model",
]
__version__ = "0.1.0"
