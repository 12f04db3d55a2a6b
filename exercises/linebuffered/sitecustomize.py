"""Whole lines, one write() each, from every Python process of a lab job.

The processes of one node (torchrun workers, mp.spawn children, anything a script starts) share the
node's output pipe. Unbuffered Python (PYTHONUNBUFFERED=1) writes a print's parts and its newline in
separate write() calls, so two processes' text merges into one line; fully buffered Python cuts lines at
8 KiB blocks and holds them back. Line buffering sends each line at once, in one write(), which a pipe
never splits (up to PIPE_BUF = 4096 bytes). The lab puts this folder first on every job's PYTHONPATH;
a sitecustomize it shadows (the system's, or one on the user's PYTHONPATH) still runs, after it.
"""

import importlib.machinery
import importlib.util
import os
import sys


def _line_buffered() -> None:
    for stream in (sys.stdout, sys.stderr):
        if stream is not None and hasattr(stream, "reconfigure"):
            stream.reconfigure(line_buffering=True, write_through=False)


def _run_shadowed_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


_line_buffered()
_run_shadowed_sitecustomize()
