"""Options shared by several commands."""

from __future__ import annotations

import click

from lab.model.spec import DEFAULT_NAME


def name_option(func):
    return click.option("--name", default=DEFAULT_NAME, show_default=True, metavar="NAME",
                        help="Which lab (several can run side by side).")(func)


def master_port_option(func):
    return click.option("--master-port", type=click.IntRange(1024, 65535), default=None, metavar="PORT",
                        help="Rendezvous port on node0 (default: 29500, or a free one if that is taken).")(func)


def json_option(func):
    return click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON instead of a table.")(func)

