"""The temporary directory a benchmark's runs (and generated tasks) live in, removed at the end unless
``--keep``. Imported by the benchmark scripts beside it (run as ``python benchmarks/NAME.py``)."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from aios_rl.contracts.errors import AiosRlError


def add_keep_flag(parser: argparse.ArgumentParser) -> None:
    """``--keep``, which :func:`work_dir` reads."""
    parser.add_argument(
        "--keep", action="store_true", help="Keep the runs and generated tasks (default: removed at the end)."
    )


@contextmanager
def work_dir(parser: argparse.ArgumentParser, args: argparse.Namespace, prefix: str) -> Iterator[Path]:
    """A new temporary directory, removed when the ``with`` ends (however it ends) unless ``args.keep``,
    which says where it is (with the tasks in it when ``args.tasks`` was not given). A framework error
    inside ends the benchmark as the CLI does: its message and exit status 2, no traceback."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield root
    except AiosRlError as exc:  # e.g. a --tasks that is not a task set: say so, as the CLI does
        parser.exit(2, f"error: {exc}\n")
    finally:
        if args.keep:
            print(f"runs{'' if args.tasks else ' and tasks'} kept in {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
