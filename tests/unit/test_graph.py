"""`lab graph`: the lab's nodes, IPs, GPUs, ranks, rendezvous and link, as Mermaid text and as a picture."""

import json

import pytest
from click.testing import CliRunner

from lab.analysis.graph import draw, lab_graph, mermaid
from lab.analysis.record import RunRecord, StepRecord, list_runs
from lab.cli import cli

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def lab_status(nodes=2, nproc_per_node=None, link=None):
    """A `lab status` entry as lifecycle.status gives it."""
    return {"spec": {"name": "g1", "nodes": nodes, "nproc_per_node": nproc_per_node, "link": link},
            "nodes": [{"index": i, "hostname": f"node{i}", "ip": f"172.30.0.{i + 2}",
                       "gpus": [str(i)] if i == 0 else [], "state": "running", "faults": []} for i in range(nodes)]}


def recorded_run(lab, placement, nproc_per_node=2, port=29533):
    """A finished run on `lab` whose ranks reported from the nodes in `placement` (node -> ranks)."""
    record = RunRecord.new("exercise03", lab)
    record.steps = [StepRecord("main", exit_codes={node: 0 for node in placement}, nproc_per_node=nproc_per_node,
                               master_port=port)]
    results = record.path / "results" / "main"
    results.mkdir(parents=True)
    for node, ranks in placement.items():
        for rank in ranks:
            (results / f"rank{rank}.json").write_text(json.dumps({"rank": rank, "node_rank": node}))
    record.status = "passed"
    record.save()
    return record


def test_ranks_come_from_where_the_last_run_put_them(own_lab_home):
    recorded_run("other", {0: [0], 1: [1]})
    recorded_run("g1", {0: [2, 3], 1: [0, 1]})  # c10d rendezvous: node1's agent became group 0
    graph = lab_graph("g1", lab_status(), "lab-g1", list_runs())
    assert [node.ranks for node in graph.nodes] == [(2, 3), (0, 1)]
    assert graph.rendezvous == "node0:29533" and graph.ranks_from.startswith("last run ")


def test_ranks_from_the_option_then_the_lab_then_one_per_node(own_lab_home):
    recorded_run("g1", {0: [0, 1], 1: [2, 3], 2: [4, 5]})  # an earlier 3-node lab of the same name: not used
    assert [node.ranks for node in lab_graph("g1", lab_status(), "lab-g1", list_runs(), 3).nodes] == [(0, 1, 2),
                                                                                                     (3, 4, 5)]
    assert [node.ranks for node in lab_graph("g1", lab_status(nproc_per_node=2), "lab-g1", list_runs()).nodes] == [
        (0, 1), (2, 3)]
    graph = lab_graph("g1", lab_status(), "lab-g1", list_runs())
    assert [node.ranks for node in graph.nodes] == [(0,), (1,)] and graph.rendezvous == "node0:29500"


def test_mermaid_names_nodes_ips_gpus_ranks_rendezvous_and_link(own_lab_home):
    text = mermaid(lab_graph("g1", lab_status(nproc_per_node=2, link="1gbit:200us"), "lab-g1"))
    assert text.startswith("flowchart TB\n")
    assert 'subgraph n0["node0 · 172.30.0.2 · GPUs 0"]' in text
    assert 'subgraph n1["node1 · 172.30.0.3 · no GPU"]' in text
    assert 'n1r3["rank 3"]' in text and 'rdzv{{"rendezvous node0:29500"}}' in text
    assert "n1 -.->|rendezvous| rdzv" in text and "lab-g1 (bridge, link 1gbit:200us)" in text
    assert "unshaped" in mermaid(lab_graph("g1", lab_status(), "lab-g1"))


@pytest.mark.parametrize("image_format,magic", [("png", PNG_MAGIC), ("svg", b"<?xml")])
def test_draws_png_and_svg(tmp_path, image_format, magic):
    target = draw(lab_graph("g1", lab_status(3, 4, "10gbit"), "lab-g1"), tmp_path / f"g.{image_format}", image_format)
    assert target.read_bytes().startswith(magic)


def test_cli_prints_mermaid_and_writes_pictures(own_lab_home, monkeypatch, tmp_path):
    from lab.nodes import lifecycle

    monkeypatch.setattr(lifecycle, "status", lambda name: {name: lab_status()})
    runner = CliRunner()
    result = runner.invoke(cli, ["graph", "--name", "g1", "--nproc-per-node", "2"])
    assert result.exit_code == 0 and 'n1r2["rank 2"]' in result.output, result.output
    result = runner.invoke(cli, ["graph", "--name", "g1", "-o", str(tmp_path / "lab.svg")])
    assert result.exit_code == 0 and (tmp_path / "lab.svg").read_bytes().startswith(b"<?xml"), result.output
    result = runner.invoke(cli, ["graph", "--name", "g1", "--format", "png", "-o", str(tmp_path / "lab.svg")])
    assert result.exit_code != 0 and "--format png" in str(result.exception)
