"""Commands that draw: `lab graph` (the shape of a lab) and `lab report` (one run as an HTML page)."""

from __future__ import annotations

from pathlib import Path

import click

from lab.cli.console import console
from lab.cli.options import name_option
from lab.errors import SpecError

SUFFIX_FORMATS = {".png": "png", ".svg": "svg"}


@click.command("graph")
@name_option
@click.option("--format", "image_format", type=click.Choice(["mermaid", "png", "svg"]), default=None,
              help="mermaid (text), png or svg. Default: from -o's suffix (.png, .svg), else mermaid.")
@click.option("--nproc-per-node", type=click.IntRange(1, 64), default=None, metavar="K",
              help="Show K ranks per node (default: where the lab's last run put them).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE",
              help="Write here (default: mermaid to stdout, pictures to the lab's folder).")
def graph_command(name, image_format, nproc_per_node, output):
    """Draw the lab: its nodes with their IPs, GPUs and ranks, the rendezvous endpoint, the link profile.

    \b
    Examples:
      lab graph                          Mermaid text (paste into a Markdown file)
      lab graph -o lab.png               a picture
      lab graph --format svg --nproc-per-node 4
    """
    from lab import paths
    from lab.analysis.graph import draw, lab_graph, mermaid
    from lab.analysis.record import list_runs
    from lab.nodes import lifecycle
    from lab.nodes.labels import network_name

    suffix_format = SUFFIX_FORMATS.get(output.suffix.lower()) if output else None
    if image_format and suffix_format and image_format != suffix_format:
        raise SpecError(f"--format {image_format} but -o '{output}' ends in {output.suffix}",
                        f"name the file *.{image_format}, or leave out --format")
    image_format = image_format or suffix_format or "mermaid"
    graph = lab_graph(name, lifecycle.status(name)[name], network_name(name), list_runs(), nproc_per_node)
    if image_format == "mermaid":
        text = mermaid(graph)
        if output is None:
            print(text, end="")
            return
        output.write_text(text)
    else:
        output = output or paths.lab_dir(name) / f"graph.{image_format}"
        output.parent.mkdir(parents=True, exist_ok=True)
        draw(graph, output, image_format)
    console.print(f"graph of lab '{name}': {output}", markup=False, highlight=False)


@click.command("report")
@click.argument("run", default="latest")
def report_command(run):
    """Write RUN's report (id, id prefix, exercise name, or 'latest') as one HTML file in its record.

    The page holds the verdict, the diagnosis, the checks, the timeline, the loss curves and every
    node's log; it needs nothing else (open it offline, attach it to an issue).
    """
    from lab.analysis.record import load
    from lab.analysis.report import write_report

    path = write_report(load(run))
    console.print(f"report: {path}", markup=False, highlight=False)
