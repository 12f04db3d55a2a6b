"""Options shared by several commands."""

from __future__ import annotations

import functools
from pathlib import Path

import click

from lab.errors import SpecError
from lab.jobs.staging import parse_copy_limit
from lab.model.spec import DEFAULT_NAME


def name_option(func):
    return click.option("--name", default=DEFAULT_NAME, show_default=True, metavar="NAME",
                        help="Which lab (several can run side by side).")(func)


def master_port_option(func):
    return click.option("--master-port", type=click.IntRange(1024, 65535), default=None, metavar="PORT",
                        help="Rendezvous port on node0 (default: 29500, or a free one if that is taken).")(func)


def json_option(func):
    return click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON instead of a table.")(func)



DRIVER_ALIASES = {"docker": "containers", "local": "host"}  # the old --driver values, as --on values


def target_options(func):
    """--on, --inventory and --nodes: where a job runs (lab/jobs/targets.py); the old --driver is a hidden alias of --on."""

    @functools.wraps(func)
    def with_target(*args, on, driver, **kwargs):
        if driver is not None:
            if on is not None and on != DRIVER_ALIASES[driver]:
                raise SpecError(f"--driver {driver} means --on {DRIVER_ALIASES[driver]}; it does not go with --on {on}",
                                "leave out --driver")
            on = DRIVER_ALIASES[driver]
        return func(*args, on=on, **kwargs)

    options = [
        click.option("--on", type=click.Choice(["containers", "host"]), default=None,
                     help="containers: the nodes of lab --name (the default); host: every node a group of processes "
                          "on this host (a native baseline)."),
        click.option("--driver", type=click.Choice(sorted(DRIVER_ALIASES)), default=None, hidden=True,
                     help="The old name of --on: docker is --on containers, local is --on host."),
        click.option("--nodes", type=click.IntRange(1, 64), default=None,
                     help="Node count for --on host (default 2)."),
        click.option("--inventory", type=click.Path(path_type=Path), default=None, metavar="HOSTS.INI",
                     help="Run on the real machines of this ansible inventory, over ssh (see lab/provision/inventory.py)."),
    ]
    for option in reversed(options):
        with_target = option(with_target)
    return with_target


def diagnosis_options(func):
    """--fail-grace and --verbose: when a failed job is stopped, and how much of its diagnosis is printed."""
    func = click.option("-v", "--verbose", is_flag=True,
                        help="Print every finding of a failed run's diagnosis (default: the top one).")(func)
    return click.option("--fail-grace", type=click.FloatRange(0, 86400), default=10.0, show_default=True,
                        metavar="SECONDS",
                        help="Once every process of a node has failed, stop the others this much later instead of "
                             "waiting for --timeout (0: wait for the timeout).")(func)


def user_job_options(func):
    """What `lab exec` and `lab torchrun` share: --env, --timeout, where the job runs, the rendezvous port,
    the diagnosis options and --json."""
    for option in reversed([
        click.option("--env", "env_pairs", multiple=True, metavar="K=V", help="Extra environment variable (repeatable)."),
        click.option("--timeout", type=click.IntRange(1, 86400), default=None,
                     help="Seconds before every process is stopped."),
        click.option("--copy-limit", default="100m", show_default=True, metavar="SIZE",
                     callback=lambda ctx, param, value: parse_copy_limit(value),
                     help="Refuse to copy more than this of a folder into the run (virtual environments, .gitignore'd "
                          "and .labignore'd files never count)."),
        name_option, target_options, master_port_option, diagnosis_options, json_option,
    ]):
        func = option(func)
    return func
