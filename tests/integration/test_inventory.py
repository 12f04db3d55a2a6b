"""Graduation: `lab run --inventory` reaches the lab's containers only as SSH hosts of a hand-written inventory."""

import json

import pytest

from lab import paths

from .conftest import lab, lab_json

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_exercise01_runs_on_the_hosts_of_an_inventory(two_nodes, tmp_path):
    nodes = lab_json("status", "--name", two_nodes)[two_nodes]["nodes"]
    key = paths.lab_dir(two_nodes) / "ssh" / "id_ed25519"
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("\n".join(
        ["[nodes]"]
        + [f"n{node['index']} ansible_host=127.0.0.1 ansible_port={node['ssh_port']}" for node in nodes]
        + ["", "[nodes:vars]", "ansible_user=root", f"ansible_ssh_private_key_file={key}",
           "ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR'",
           "ansible_python_interpreter=/opt/lab-venv/bin/python",
           "# 127.0.0.1 is how this machine reaches the nodes; they reach node0 by its name",
           "master_addr=node0",
           "lab_exercises_dir=/lab/exercises", "lab_shared_dir=/lab/shared", ""]))
    result = lab("run", "exercise01", "--inventory", str(inventory), "--json", timeout=600)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-2000:])
    [record] = json.loads(result.stdout)
    assert record["status"] == "passed" and record["lab"] == "inventory-hosts"
    assert all(check["passed"] for check in record["checks"]) and len(record["checks"]) > 3
    # The results were copied back over ssh into the inventory's own folder, not read from the lab's mount.
    copied = paths.lab_dir("inventory-hosts") / "shared" / "runs" / record["run_id"]
    assert sorted(path.name for path in (copied / "results" / "main").glob("rank*.json")) == ["rank0.json", "rank1.json"]

