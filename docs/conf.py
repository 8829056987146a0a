"""Sphinx configuration for the coresvm documentation.

Build (warnings are errors, the gallery examples run)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

``-D plot_gallery=0`` skips running the examples.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT / "src"))  # document this checkout, installed or not
os.environ.setdefault("NUMBA_CACHE_DIR", str(DOCS / "_build" / "numba_cache"))

import coresvm  # noqa: E402

project = "coresvm"
author = "the coresvm developers"
copyright = "the coresvm developers"  # noqa: A001
version = release = coresvm.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "_generated", "auto_examples/*.ipynb", "auto_examples/*.py", "**.codeobj.json"]
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3

# API reference: one page per listed name (api.rst), numpydoc renders the sections.
autosummary_generate = True
templates_path = ["_templates"]
autodoc_default_options = {"members": True, "inherited-members": False}
autodoc_typehints = "none"  # the numpydoc "Parameters" sections carry the types
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

intersphinx_mapping = {
    "python": ("https://docs.python.org/3", None),
    "numpy": ("https://numpy.org/doc/stable/", None),
    "sklearn": ("https://scikit-learn.org/stable/", None),
}
# The build must not need the network: links into these projects' docs only with CORESVM_DOCS_INTERSPHINX=1.
if not os.environ.get("CORESVM_DOCS_INTERSPHINX"):
    intersphinx_mapping = {}

sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "matplotlib_animations": False,
    "image_scrapers": ("matplotlib",),
    # "Examples using X" on each API page (included by _templates/autosummary/class.rst)
    "backreferences_dir": "gen_modules/backreferences",
    "doc_module": ("coresvm",),
}

html_theme = "pydata_sphinx_theme"
html_title = f"coresvm {release}"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}
html_static_path: list[str] = []


def _write_cli_help() -> None:
    """Write ``coresvm --help`` and each command's help to _generated/ for the command-line page."""
    from coresvm.cli import build_parser

    os.environ["COLUMNS"] = "100"
    parser = build_parser()
    out = DOCS / "_generated"
    out.mkdir(exist_ok=True)
    (out / "cli_coresvm.txt").write_text(parser.format_help())
    subparsers = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, sub in subparsers.choices.items():
        (out / f"cli_{name}.txt").write_text(sub.format_help())


_write_cli_help()
