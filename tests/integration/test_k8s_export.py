"""`lab export k8s`: the pods' own script, run across the lab's containers (pod names mapped to node names)."""

import re
from pathlib import Path

import pytest
import yaml

from lab import paths
from lab.jobs.exercises import find
from lab.jobs.runner import check_results

from .conftest import lab
from .test_adhoc import TORCHRUN_SCRIPT, lab_json_before, node_logs

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def run_as_pods(lab_name: str, manifest: str, tmp_path: Path) -> tuple[dict, Path]:
    """Every pod's command through `lab exec`: JOB_COMPLETION_INDEX is the node rank, `<job>-<i>.<service>` is node<i>,
    the ConfigMap is a copied folder and the pods' output folder one in the run's shared folder."""
    config_map, service, job = yaml.safe_load_all(manifest)
    pod = job["spec"]["template"]["spec"]
    container = pod["containers"][0]
    files = tmp_path / "files"
    files.mkdir()
    for name, text in config_map["data"].items():
        (files / name).write_text(text)
    pod_name = re.compile(rf"^{re.escape(job['metadata']['name'])}-(\d+)\.{re.escape(pod['subdomain'])}$")
    env = {item["name"]: item["value"] for item in container["env"]}
    env["MASTER_ADDR"] = pod_name.sub(r"node\1", env["MASTER_ADDR"])
    assert env["MASTER_ADDR"] == "node0"
    env.update(LAB_JOB_DIR="files", LAB_OUTPUT="out", PYTHON="python")
    options = [option for key, value in env.items() for option in ("--env", f"{key}={value}")]
    assert job["spec"]["completions"] == 2
    record = lab_json_before(["exec", "--name", lab_name, "--copy", str(files), *options],
                             ["--", "env", "JOB_COMPLETION_INDEX={node_rank}", *container["command"]])
    output = paths.lab_dir(lab_name) / "shared" / "runs" / record["run_id"] / "work" / "out"
    return record, output


@pytest.mark.parametrize("exercise", ["exercise01", "exercise03"])
def test_exercise_pods_pass_the_checker(two_nodes, tmp_path, exercise):
    manifest = lab("export", "k8s", exercise, check=True).stdout
    record, output = run_as_pods(two_nodes, manifest, tmp_path)
    assert record["status"] == "passed", node_logs(record)
    found = find(exercise)
    checks = check_results(found, found.nodes, found.nproc_per_node, output / "results")
    assert checks and all(check.passed for check in checks), [c for c in checks if not c.passed]


def test_script_pods_run_with_their_arguments(two_nodes, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TORCHRUN_SCRIPT)
    manifest = lab("export", "k8s", "--nproc-per-node", "2", "--script", str(script), "--epochs", "1", check=True).stdout
    (tmp_path / "pods").mkdir()
    record, _ = run_as_pods(two_nodes, manifest, tmp_path / "pods")
    assert record["status"] == "passed", node_logs(record)
    text = "\n".join(node_logs(record).values())
    for rank in range(4):
        assert f"RESULT rank={rank} world=4 sum=10 args=--epochs 1" in text, text
