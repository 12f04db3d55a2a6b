"""`lab stacks`: where every process of the jobs running now waits, one line per rank, kept in their run records."""

from __future__ import annotations

import json

import click
from rich.markup import escape

from lab.cli.console import console
from lab.cli.options import json_option, name_option, target_options


@click.command("stacks")
@name_option
@target_options
@json_option
def stacks_command(name, on, nodes, inventory, as_json):
    """Show the Python stack of every process of the jobs running now, on every node.

    \b
    One line per rank says where it waits, e.g.
      rank 1 node1: init_process_group -> TCPStore connect node0:29500 (train.py:4)
    torchrun's agents are told from their workers. Every thread's frames are kept in the
    run's record (.lab/runs/<id>/stacks/). Stacks are read with py-spy from this host, so
    the nodes need no extra privilege; real hosts (--inventory) need py-spy of their own.
    """
    from lab.analysis import stacks
    from lab.jobs import targets

    target = targets.resolve(on, name, inventory, nodes)
    captured = stacks.capture_stacks(target.transport, "", None, range(target.nnodes))
    saved = stacks.save_by_run(captured)
    if as_json:
        print(json.dumps({"processes": [stack.to_dict() for stack in captured],
                          "records": {run_id: str(folder) for run_id, folder in saved.items()}}, indent=2))
        return
    if not captured:
        console.print(f"no job processes are running on the nodes of {escape(target.label)}")
        return
    by_run: dict[str, list] = {}
    for stack in captured:
        by_run.setdefault(stack.run_id, []).append(stack)
    for run_id, found in sorted(by_run.items(), key=lambda item: item[0] or "~"):  # unreadable nodes last
        if run_id:
            where = f": every thread's stack in {saved[run_id]}" if run_id in saved else " (no record on this machine)"
            console.print(f"[bold]{escape(run_id)}[/][dim]{escape(where)}[/]")
        for stack in found:
            console.print("  " + escape(stack.summary()), no_wrap=True, overflow="ellipsis", crop=True)
