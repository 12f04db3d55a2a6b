"""`lab up --scheduler slurm`: the nodes form a real Slurm cluster, and `lab export slurm` scripts run on it unchanged.

Builds the Slurm image variant (once; cached by its tag) on the node image: slow.
"""

import json
import uuid

import pytest

from .conftest import lab, lab_json

# One worker for the module's tests under pytest-xdist: they share the module's Slurm lab, made once.
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.xdist_group("slurm_lab")]


@pytest.fixture(scope="module")
def slurm_lab():
    name = f"sl{uuid.uuid4().hex[:6]}"
    lab_json("up", "--nodes", "2", "--name", name, "--scheduler", "slurm", timeout=1800)
    yield name
    lab("down", "--name", name)


def sbatch(name, script, *args):
    result = lab("sbatch", "--name", name, "--json", str(script), *args, timeout=900)
    return result, json.loads(result.stdout) if result.stdout.strip().startswith("{") else None


def on_node0(name, *command):
    return lab("ssh", "--name", name, "node0", *command, check=True).stdout


def test_sinfo_shows_every_node_idle(slurm_lab):
    lines = on_node0(slurm_lab, "sinfo", "-h", "-N", "-o", "%N|%T|%c").split()
    assert sorted(lines) == ["node0|idle|%d" % int(lines[0].split("|")[2]), "node1|idle|%d" % int(lines[0].split("|")[2])]
    key = on_node0(slurm_lab, "stat", "-c", "%a %U", "/etc/munge/munge.key").strip()
    assert key == "400 munge"


@pytest.mark.parametrize("exercise", ["exercise01", "exercise02", "exercise03", "exercise04"])
def test_exported_exercise_runs_unchanged_and_passes_its_checker(slurm_lab, tmp_path, exercise):
    script = tmp_path / "job.sh"
    lab("export", "slurm", exercise, "-o", str(script), check=True)
    result, record = sbatch(slurm_lab, script)
    assert result.returncode == 0 and record["status"] == "passed", (result.stdout[-3000:], result.stderr[-3000:])
    checks = [check["name"] for check in record["checks"]]
    assert len(checks) > 2 and any("completed with exit code 0" in name for name in checks)
    assert record["exercise"] == "sbatch" and record["steps"][0]["command"] == ["sbatch", "job.sh"]


def test_srun_with_more_nodes_than_the_job_has_is_one_line(slurm_lab, tmp_path):
    script = tmp_path / "too_many.sh"
    script.write_text("#!/bin/bash\n#SBATCH --nodes=1\nsrun --nodes=2 --ntasks=2 hostname\n")
    result, record = sbatch(slurm_lab, script)
    assert result.returncode == 1 and record["status"] == "failed"
    assert "failed with exit code 1; srun: Only allocated 1 nodes asked for 2" in record["error"]


def test_a_drained_node_is_named(slurm_lab, tmp_path):
    script = tmp_path / "two.sh"
    script.write_text("#!/bin/bash\n#SBATCH --nodes=2\nsrun hostname\n")
    on_node0(slurm_lab, "scontrol", "update", "nodename=node1", "state=drain", "reason=disk-check")
    try:
        result = lab("sbatch", "--name", slurm_lab, str(script), timeout=300)
    finally:
        on_node0(slurm_lab, "scontrol", "update", "nodename=node1", "state=resume")
    assert result.returncode == 7 and "Traceback" not in result.stderr
    assert "error: job" in result.stderr and "needs 2 node(s) but only 1 can run jobs: node1 drained (disk-check)" in \
        result.stderr
    assert on_node0(slurm_lab, "squeue", "-h").strip() == ""  # the job that could not start was cancelled


@pytest.mark.long  # Slurm's shortest limit is a minute, checked every 30 s; the message: tests/unit/test_slurm_cluster.py
def test_a_job_over_its_time_limit_is_one_line(slurm_lab, tmp_path):
    script = tmp_path / "slow.sh"
    script.write_text("#!/bin/bash\n#SBATCH --time=0:01\nsleep 600\n")
    result, record = sbatch(slurm_lab, script)
    assert result.returncode == 1 and record["status"] == "failed"
    assert "reached its time limit (00:01:00) and was stopped" in record["error"]


def test_a_lab_without_slurm_says_how_to_get_one(two_nodes, tmp_path):
    script = tmp_path / "x.sh"
    script.write_text("#!/bin/bash\nhostname\n")
    result = lab("sbatch", "--name", two_nodes, str(script))
    assert result.returncode == 5 and "does not run Slurm" in result.stderr and "--scheduler slurm" in result.stderr
