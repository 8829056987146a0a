"""``python -m coresvm.cli``: the ``coresvm`` command."""

import sys

from . import main

sys.exit(main())
