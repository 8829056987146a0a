"""The ``coresvm`` command line: gsvm- and LIBSVM-compatible training, prediction, CV and model selection.

Subcommands: ``train``, ``predict``, ``cv``, ``select``, ``scale``, ``info`` and
``demo`` (the README's first command).  Exit codes: 0 on success, 2 on a usage or
input error (one line on stderr, never a traceback), 130 when interrupted.

Short options follow both gsvm (Strack 2013, Appendix A) and LIBSVM's ``svm-train``.
Where the two use a letter differently, the value decides when it can (``-t
sparse`` is gsvm's matrix type, ``-t 2`` LIBSVM's kernel type; likewise ``-b``,
``-s``, ``-m`` and ``-p``).  Only ``-d`` and ``-r`` are numbers in both: they
mean LIBSVM's degree and coef0, and gsvm's draw number and grid resolution with
``--gsvm``.  Every meaning also has an unambiguous long option.

One module per command (``train``, ``predict``, ``cv``, ``select``, ``scale``,
``info``, ``demo``: each has ``add_parser`` and ``run``), and what they share:
``options`` (the shared options), ``settings`` (what the letters mean),
``data_files`` (data readers and writer), ``fitting`` (fits and k-fold CV with
progress), ``grid`` (the C/gamma grid and its search), ``progress`` and ``errors``.
"""

from __future__ import annotations

import argparse
import sys

from . import cv, demo, info, predict, scale, select, train
from .data_files import read_data, read_data_indexed, write_data
from .errors import Parser, UsageError, one_line
from .options import preprocess_argv
from .progress import Progress

__all__ = ["Progress", "UsageError", "build_parser", "main", "read_data", "read_data_indexed", "write_data"]

# the commands in the order of 'coresvm --help'
COMMANDS = {"train": train, "predict": predict, "cv": cv, "select": select, "scale": scale, "info": info,
            "demo": demo}

DESCRIPTION = """\
Kernel SVMs for large data by core-set and Frank-Wolfe methods on the unit simplex.

Data files are LIBSVM/svmlight text (1-based 'label index:value ...'), CSV (label in the
first column) or .npy (label in the first column), optionally compressed (.gz, .xz, .bz2).
Model files are coresvm's native format (JSON + arrays, no pickle) or LIBSVM's text format,
which LIBSVM's svm-predict reads.  Run 'coresvm COMMAND --help' for a command's options."""


def build_parser() -> argparse.ArgumentParser:
    """The ``coresvm`` parser with one subparser per command (each command's ``run`` as its ``handler``)."""
    parser = Parser(prog="coresvm", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for module in COMMANDS.values():
        module.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 success, 2 usage or input error)."""
    from ..model_io import ModelFormatError

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    command = next((token for token in argv if not token.startswith("-")), None)
    if command in ("train", "cv", "select"):
        at = argv.index(command) + 1
        argv = argv[:at] + preprocess_argv(argv[at:])
    try:
        args = parser.parse_args(argv)
    except UsageError as error:
        print(f"{_prog(command)}: error: {error} (see '{_prog(command)} --help')", file=sys.stderr)
        return 2
    except SystemExit as exit_:  # --help
        return int(exit_.code or 0)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return args.handler(args)
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except (UsageError, ModelFormatError, ValueError, OSError) as error:
        print(f"coresvm {args.command}: error: {_describe(error)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"coresvm {args.command}: interrupted", file=sys.stderr)
        return 130


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush cannot fail again."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _prog(command: str | None) -> str:
    return f"coresvm {command}" if command in COMMANDS else "coresvm"


def _describe(error: BaseException) -> str:
    if isinstance(error, FileNotFoundError) and error.filename:
        return f"file not found: {error.filename}"
    if isinstance(error, OSError) and error.filename:
        return f"cannot access {error.filename}: {error.strerror or error}"
    return one_line(error)

