"""One `lab` call in a process of its own, forked from a server that imported the command line once.

The suite calls `lab` some five hundred times; a new interpreter spends 0.2 s of CPU importing click, rich, the
Docker SDK and lab before it does anything, and the suite is bound by its two cores (bench/RESULTS.md, "Where the
suite's CPU goes"). Each call still is its own process, with its own exit code, streams, environment, working folder
and signal handlers, as `python -m lab.cli` would have.
"""

import importlib
import os
import sys

# What the server imports before it forks: the command line and every module of its commands.
PRELOAD = ["lab.cli", *sorted({f"lab.cli.{module}" for module, _ in importlib.import_module("lab.cli").COMMANDS.values()})]


def run_cli(args: list[str], env: dict[str, str], cwd: str, stdout_path: str, stderr_path: str) -> None:
    """The child's body: the environment, folder and streams the call was given, then lab's own `main`."""
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    for fd, path in ((1, stdout_path), (2, stderr_path)):
        with open(path, "w") as stream:
            os.dup2(stream.fileno(), fd)
    sys.stdout = open(1, "w", closefd=False)
    sys.stderr = open(2, "w", closefd=False)
    sys.argv = ["lab", *args]
    from lab.cli import main

    main()
