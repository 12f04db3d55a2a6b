"""The `lab` command's entry point. Loading the CLI takes a moment (click, rich, the Docker SDK); a Ctrl-C in that
moment ends the command as a Ctrl-C does later (one line, exit 130), not with a traceback of the import."""

import sys


def main() -> None:
    try:
        from lab.cli import main as run_cli
    except KeyboardInterrupt:
        sys.stderr.write("interrupted before the command started: nothing was done\n")
        sys.exit(130)
    run_cli()
