"""`lab up --image host` on a real engine: nodes from the tiny image run this host's Python (CPU here)."""

import sys

import pytest

from .conftest import lab, lab_json, labelled

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_host_image_nodes_run_exercise01_with_the_host_python(fresh_name, client):
    up = lab_json("up", "--nodes", "2", "--name", fresh_name, "--image", "host", "--gpus", "auto")
    assert up["changed"] and [node["state"] for node in up["nodes"]] == ["running", "running"]

    containers, _, _ = labelled(client, fresh_name)
    for container in containers:
        assert container.image.tags[0].startswith("lab-host:")
        mounts = {mount["Destination"]: mount for mount in container.attrs["Mounts"]}
        assert mounts["/usr"]["RW"] is False and mounts["/usr"]["Source"] == "/usr"
        assert "/etc" not in mounts  # /etc is the node's own, so Docker keeps managing hosts and resolv.conf
        assert container.labels["io.lab.python"] == sys.executable

    record = lab_json("run", "exercise01", "--name", fresh_name, timeout=600)[0]
    assert record["passed"], record["checks"]

    doctor = lab_json("doctor", "--name", fresh_name)
    assert doctor["ok"], [node["problems"] for node in doctor["nodes"]]
    for node in doctor["nodes"]:
        assert node["executable"] == sys.executable and node["torch"]
        assert all(node["peers"].values()) and set(node["peers"]) == {"node0", "node1"}

    status = lab_json("status", "--name", fresh_name)[fresh_name]
    assert status["spec"]["image"] == "host"
    assert [node["gpus"] for node in status["nodes"]] == [node["assigned_gpus"] for node in doctor["nodes"]]

    if doctor["auto_backend"] == "gloo":  # no GPUs: nccl is refused at once instead of hanging
        refused = lab("run", "exercise01", "--name", fresh_name, "--backend", "nccl", timeout=60)
        assert refused.returncode == 7 and "--backend nccl needs one GPU per process" in refused.stderr
