"""`lab bench` end to end on a real lab: the memory part, its JSON and its results file."""

import json

import pytest

from tests.integration.conftest import lab

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_bench_memory_part_reports_every_idle_node(fresh_name, tmp_path):
    result = lab("bench", "--only", "memory", "--name", fresh_name, "--results", str(tmp_path), "--json")
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    nodes = report["memory"]["nodes"]
    assert sorted(nodes) == [f"lab-{fresh_name}-node0", f"lab-{fresh_name}-node1"]
    for figures in nodes.values():
        assert 0 < figures["docker_stats_mib"] < 200 and "sshd" in figures["processes"], nodes
    assert json.loads((tmp_path / "latest.json").read_text())["memory"] == report["memory"]
    verdict = [row for row in report["verdicts"] if row[0].startswith("idle node memory")]
    assert verdict and verdict[0][3] in ("met", "MISSED")
    assert "memory per idle node" in result.stderr, result.stderr  # the tables went to stderr
