"""Build hook: the wheel ships the solver loops compiled by Numba for the building machine.

After the sources are copied to the build directory, ``python -m coresvm.precompile`` runs there
with Numba's in-tree cache, so the wheel carries ``coresvm/**/__pycache__/*.nbi, *.nbc``.  Numba
keys each entry by a hash of the source file, the Numba and Python versions and the CPU: a wheel
built and installed on the same machine (``pip install .``, an sdist) loads the loops instead of
compiling them in the first fits (45 s on 2 cores); anywhere else Numba ignores the entries and
compiles as usual.  ``CORESVM_SKIP_PRECOMPILE=1`` skips the step; a failure only warns.
"""

import os
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithCompiledLoops(build_py):
    """``build_py`` that also fills the build directory's Numba cache (see the module docstring)."""

    def run(self) -> None:
        super().run()
        if os.environ.get("CORESVM_SKIP_PRECOMPILE") or getattr(self, "editable_mode", False):
            return
        env = {key: value for key, value in os.environ.items() if key != "NUMBA_CACHE_DIR"}
        # The built package first, then this process's path: pip's isolated build environment (numba, numpy...)
        env["PYTHONPATH"] = os.pathsep.join([os.path.abspath(self.build_lib), *filter(None, sys.path)])
        try:
            subprocess.run([sys.executable, "-m", "coresvm.precompile", "-q"], env=env, check=True, timeout=3600)
        except (OSError, subprocess.SubprocessError) as error:
            self.warn(f"coresvm's solver loops were not precompiled ({error}): the first fits will compile them")


setup(cmdclass={"build_py": BuildPyWithCompiledLoops})
