"""The shape of a lab: its nodes (hostname, IP, GPUs), the ranks each runs, the rendezvous, the link between nodes.

`lab_graph` builds it from what `lab status` reports (lab/nodes/lifecycle.py) and the lab's run records; it
needs no engine itself. `mermaid` writes it as a Mermaid flowchart, `draw` as a PNG or SVG (matplotlib).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from lab.analysis.record import RunRecord
from lab.model.spec import MASTER_PORT, LabSpec

FORMATS = ("mermaid", "png", "svg")


@dataclass(frozen=True)
class GraphNode:
    index: int
    hostname: str
    ip: str | None
    gpus: tuple[str, ...]
    ranks: tuple[int, ...]
    state: str
    faults: tuple[str, ...] = ()


@dataclass(frozen=True)
class LabGraph:
    lab: str
    network: str  # the bridge the nodes share
    nodes: tuple[GraphNode, ...]
    rendezvous: str  # "node0:29500"
    link: str | None  # the link profile (`lab up --link`), None: unshaped
    ranks_from: str  # where the ranks per node come from, said plainly


def lab_graph(lab: str, status: dict, network: str, runs: list[RunRecord] = (),
              nproc_per_node: int | None = None) -> LabGraph:
    """The graph of `lab` from its `lab status` entry ({"spec", "nodes"}) and its runs (oldest first).

    Ranks per node: `nproc_per_node` when given; else where the ranks of the lab's last run on these nodes ran;
    else the lab's `--nproc-per-node`; else one process per node.
    """
    spec = LabSpec.from_dict(status["spec"])
    states = sorted(status["nodes"], key=lambda node: node["index"])
    last = next((record for record in reversed(list(runs)) if record.lab == lab and _placement(record, len(states))),
                None)
    if nproc_per_node:
        placement, ranks_from = _even(len(states), nproc_per_node), f"--nproc-per-node {nproc_per_node}"
    elif last is not None:
        placement, ranks_from = _placement(last, len(states)), f"last run {last.run_id}"
    elif spec.nproc_per_node:
        placement, ranks_from = _even(len(states), spec.nproc_per_node), "the lab's --nproc-per-node"
    else:
        placement, ranks_from = _even(len(states), 1), "one process per node (no run yet)"
    port = next((step.master_port for step in reversed(last.steps) if step.master_port), None) if last else None
    nodes = tuple(GraphNode(node["index"], node["hostname"], node.get("ip"), tuple(node.get("gpus") or ()),
                            tuple(placement.get(node["index"], ())), node.get("state", "?"),
                            tuple(node.get("faults") or ())) for node in states)
    return LabGraph(lab, network, nodes, f"{spec.master_addr}:{port or MASTER_PORT}", spec.link, ranks_from)


def _even(nnodes: int, nproc_per_node: int) -> dict[int, list[int]]:
    return {node: list(range(node * nproc_per_node, (node + 1) * nproc_per_node)) for node in range(nnodes)}


def _placement(record: RunRecord, nnodes: int) -> dict[int, list[int]] | None:
    """node -> ranks in the record's last step: where the ranks said they ran, else its processes per node.

    None when the run was on a different number of nodes (an earlier lab of the same name) or says nothing.
    """
    step = record.steps[-1] if record.steps else None
    if step is None or len(step.exit_codes) != nnodes:
        return None
    placement: dict[int, set[int]] = {}
    for path in sorted((record.path / "results" / step.name).glob("rank*.json")):
        try:
            data = json.loads(path.read_text())
            placement.setdefault(int(data["node_rank"]), set()).add(int(data["rank"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    if placement and all(node < nnodes for node in placement):
        return {node: sorted(ranks) for node, ranks in placement.items()}
    return _even(nnodes, step.nproc_per_node) if step.nproc_per_node else None


def _gpus_text(gpus: tuple[str, ...]) -> str:
    return f"GPUs {', '.join(gpus)}" if gpus else "no GPU"


def _ranks_text(ranks: tuple[int, ...]) -> str:
    if not ranks:
        return "no ranks"
    if len(ranks) > 2 and ranks == tuple(range(ranks[0], ranks[-1] + 1)):
        return f"ranks {ranks[0]}-{ranks[-1]}"
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def mermaid(graph: LabGraph) -> str:
    """A Mermaid flowchart: the network, each node with its ranks, the rendezvous on node0."""
    link = f"link {graph.link}" if graph.link else "unshaped"
    lines = ["flowchart TB", f'  net(["{graph.network} (bridge, {link})"])']
    for position, node in enumerate(graph.nodes):
        title = f"{node.hostname} · {node.ip or 'no IP'} · {_gpus_text(node.gpus)}"
        if node.state != "running" or node.faults:
            title += f" · {', '.join([node.state] * (node.state != 'running') + list(node.faults))}"
        lines.append(f'  subgraph n{node.index}["{title}"]')
        if position == 0:
            lines.append(f'    rdzv{{{{"rendezvous {graph.rendezvous}"}}}}')
        lines += [f'    n{node.index}r{rank}["rank {rank}"]' for rank in node.ranks] or [
            f'    n{node.index}idle["no ranks"]']
        lines.append("  end")
        lines.append(f"  n{node.index} --- net")
    lines += [f"  n{node.index} -.->|rendezvous| rdzv" for node in graph.nodes[1:]]
    lines.append(f"%% ranks: {graph.ranks_from}")
    return "\n".join(lines) + "\n"


def draw(graph: LabGraph, target: Path, image_format: str = "png") -> Path:
    """The graph as a picture (`image_format` png or svg): nodes side by side on their network."""
    from matplotlib.figure import Figure  # no pyplot: its global figure list is not safe in threads
    from matplotlib.patches import FancyBboxPatch

    count = max(len(graph.nodes), 1)
    most_ranks = max((len(node.ranks) for node in graph.nodes), default=1)
    rank_rows = (most_ranks + 3) // 4
    box_width, gap = 3.0, 0.6
    box_height = 1.3 + 0.45 * rank_rows
    width = count * box_width + (count - 1) * gap
    figure = Figure(figsize=(max(width + 1.2, 6.5), box_height + 2.6))
    axes = figure.subplots()
    axes.set_xlim(-0.6, max(width, 5.3) + 0.6)
    axes.set_ylim(-1.75, box_height + 0.9)
    axes.axis("off")
    network_y = -1.0
    axes.plot([0, width], [network_y, network_y], color="#555555", linewidth=4, solid_capstyle="round")
    axes.text(width / 2, network_y - 0.35, f"{graph.network}  (bridge, "
              f"{'link ' + graph.link if graph.link else 'unshaped'})", ha="center", va="top", fontsize=9)
    for position, node in enumerate(graph.nodes):
        left = position * (box_width + gap)
        healthy = node.state == "running" and not node.faults
        axes.add_patch(FancyBboxPatch((left, 0), box_width, box_height, boxstyle="round,pad=0.02,rounding_size=0.12",
                                      facecolor="#eef3fb" if healthy else "#fbeaea",
                                      edgecolor="#2b5797" if healthy else "#b22222", linewidth=1.4))
        axes.plot([left + box_width / 2] * 2, [0, network_y], color="#555555", linewidth=1.5)
        axes.text(left + 0.15, box_height - 0.2, node.hostname, fontsize=11, fontweight="bold", va="top")
        detail = f"{node.ip or 'no IP'}\n{_gpus_text(node.gpus)}"
        if not healthy:
            detail += "\n" + ", ".join([node.state] * (node.state != "running") + list(node.faults))
        axes.text(left + 0.15, box_height - 0.55, detail, fontsize=8, va="top", color="#333333")
        for slot, rank in enumerate(node.ranks):
            column, row = slot % 4, slot // 4
            x, y = left + 0.15 + column * 0.7, 0.15 + (rank_rows - 1 - row) * 0.45
            axes.add_patch(FancyBboxPatch((x, y), 0.6, 0.32, boxstyle="round,pad=0.01,rounding_size=0.05",
                                          facecolor="#ffffff", edgecolor="#2b5797", linewidth=0.8))
            axes.text(x + 0.3, y + 0.16, f"r{rank}", ha="center", va="center", fontsize=8)
    if graph.nodes:
        axes.annotate(f"rendezvous {graph.rendezvous}", xy=(box_width * 0.75, box_height),
                      xytext=(box_width * 0.75, box_height + 0.55), ha="center", fontsize=9, color="#8b4513",
                      arrowprops={"arrowstyle": "->", "color": "#8b4513"})
    axes.set_title(f"lab '{graph.lab}': {len(graph.nodes)} node(s); ranks from {graph.ranks_from}", fontsize=10)
    figure.tight_layout()
    figure.savefig(target, dpi=110, format=image_format)
    return target
