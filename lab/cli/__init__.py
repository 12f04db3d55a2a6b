"""The `lab` command: parses options, calls the library, prints. Commands live in one module per idea."""

from __future__ import annotations

import importlib
import signal
import sys
from pathlib import Path

import click
from rich.markup import escape

from lab import paths
from lab.cli.console import errors
from lab.errors import LabError, host_error

# Every command, by name: (module of lab.cli, function). A command imports its module only when it runs (or when
# --help lists them all), so `lab exec` does not pay for the modules of `lab graph` or `lab export`.
COMMANDS = {
    "up": ("lab_commands", "up"), "provision": ("lab_commands", "provision"), "status": ("lab_commands", "status"),
    "doctor": ("lab_commands", "doctor"), "down": ("lab_commands", "down"), "fault": ("lab_commands", "fault"),
    "image": ("lab_commands", "image"), "home": ("lab_commands", "home"),
    "exercises": ("job_commands", "exercises_command"), "run": ("job_commands", "run"),
    "exec": ("job_commands", "exec_command"), "torchrun": ("job_commands", "torchrun_command"),
    "export": ("export_commands", "export"), "runs": ("record_commands", "runs_command"),
    "show": ("record_commands", "show_command"), "explain": ("record_commands", "explain_command"),
    "bench": ("bench_command", "bench"), "forecast": ("forecast_command", "forecast_command"), "stacks": ("stack_commands", "stacks_command"),
    "graph": ("graph_commands", "graph_command"), "report": ("graph_commands", "report_command"),
    "sbatch": ("slurm_commands", "sbatch_command"), "ssh": ("slurm_commands", "ssh_command"),
}


class LazyGroup(click.Group):
    """A group whose commands are imported when asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, function = COMMANDS[name]
        return getattr(importlib.import_module(f"lab.cli.{module}"), function)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="lab")
def cli():
    """A multi-node PyTorch distributed lab on one machine.

    \b
    Simulated nodes are Docker containers (node0, node1, ...) on their own network,
    provisioned with ansible, so you can rehearse multi-node jobs before you get a cluster.

    \b
    Typical session:
      lab up --nodes 2          start two nodes (builds the node image the first time)
      lab status                see them
      lab exercises             list the exercises
      lab run exercise03        torchrun across both nodes, then check the results
      lab down                  remove everything the lab created

    Files (keys, logs, run records) live in .lab/ of the current folder or the nearest parent
    that has one; LAB_HOME overrides. `lab home` prints the folder in use.
    """


def main() -> None:
    try:
        _run()
    finally:  # the outcome is decided: a late Ctrl-C must not kill Python's exit by the signal (exit -2, output lost)
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run() -> None:
    try:
        cli.main(standalone_mode=False, prog_name="lab")
    except LabError as error:
        _fail(error)
    except (click.exceptions.Abort, KeyboardInterrupt):  # click turns Ctrl-C into Abort
        errors.print("interrupted: whatever this command had started on the nodes was stopped")
        sys.exit(130)
    except click.UsageError as error:
        command = error.ctx.command_path if error.ctx else "lab"
        errors.print(f"[red]error:[/] {escape(error.format_message())}")
        errors.print(f"[dim]hint:[/] see `{command} --help`")
        sys.exit(2)
    except click.ClickException as error:
        errors.print(f"[red]error:[/] {escape(error.format_message())}")
        sys.exit(error.exit_code)
    except click.exceptions.Exit as exit_:
        sys.exit(exit_.exit_code)
    except OSError as error:  # disk full, permission denied: the host's problem, said in one line
        _fail(host_error(error))
    except Exception as error:  # a bug: keep the traceback in a log, show one line
        log = _crash_log()
        errors.print(f"[red]internal error:[/] {escape(type(error).__name__)}: {escape(str(error))}")
        errors.print(f"[dim]hint:[/] this is a bug in lab; the traceback is in {log}")
        sys.exit(70)


def _fail(error: LabError) -> None:
    errors.print(f"[red]error:[/] {escape(error.message)}")
    if error.hint:
        errors.print(f"[dim]hint:[/] {escape(error.hint)}")
    sys.exit(error.exit_code)


def _crash_log() -> Path:
    import traceback

    log = paths.logs_dir() / "crash.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as handle:
        handle.write(traceback.format_exc() + "\n")
    return log



if __name__ == "__main__":
    main()
