"""`lab up / status / down` on a real engine: nodes, names, network, gloo across containers."""

import json
import os
import stat

import pytest

from lab import paths

from .conftest import lab, lab_json, labelled

pytestmark = pytest.mark.docker

ALL_REDUCE = (
    "import datetime, os, torch, torch.distributed as dist;"
    "dist.init_process_group('gloo', init_method='tcp://node0:29400', rank=int(os.environ['R']), world_size=2,"
    " timeout=datetime.timedelta(seconds=60));"
    "t = torch.tensor([float(os.environ['R']) + 1]); dist.all_reduce(t); print('SUM', t.item());"
    "dist.destroy_process_group()"
)


def node_exec(client, name, index, cmd, env=None):
    container = client.containers.get(f"lab-{name}-node{index}")
    return container.exec_run(cmd, environment=env or {}, demux=False)


def test_status_shows_nodes(two_nodes):
    report = lab_json("status", "--name", two_nodes)[two_nodes]
    nodes = report["nodes"]
    assert [n["hostname"] for n in nodes] == ["node0", "node1"]
    assert all(n["state"] == "running" and n["ip"] and n["ssh_port"] for n in nodes)
    assert report["spec"]["nodes"] == 2


def test_ssh_published_on_loopback_only_with_private_key(client, two_nodes):
    for index in range(2):
        container = client.containers.get(f"lab-{two_nodes}-node{index}")
        bindings = container.attrs["NetworkSettings"]["Ports"]["22/tcp"]
        assert {b["HostIp"] for b in bindings} == {"127.0.0.1"}
    key = paths.lab_dir(two_nodes) / "ssh" / "id_ed25519"
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600


def test_node1_resolves_and_reaches_node0(client, two_nodes):
    code, output = node_exec(client, two_nodes, 1, [
        "/opt/lab-venv/bin/python", "-c",
        "import socket; print(socket.gethostbyname('node0')); s = socket.create_connection(('node0', 22), 5);"
        " print(s.recv(8).decode())"])
    node0_ip = lab_json("status", "--name", two_nodes)[two_nodes]["nodes"][0]["ip"]
    assert code == 0, output
    assert output.decode().split() == [node0_ip, "SSH-2.0-"]


def test_lab_network_carries_large_frames(client, two_nodes):
    code, output = node_exec(client, two_nodes, 0, ["cat", "/sys/class/net/eth0/mtu"])
    assert code == 0 and output.decode().strip() == "65520"


def test_gloo_all_reduce_across_containers(client, two_nodes):
    import threading

    outputs = {}

    def run(index):
        outputs[index] = node_exec(client, two_nodes, index, ["/opt/lab-venv/bin/python", "-c", ALL_REDUCE], {"R": str(index)})

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    for index in range(2):
        code, output = outputs[index]
        assert code == 0, output
        assert "SUM 3.0" in output.decode()


def test_provisioning_wrote_env(client, two_nodes):
    code, output = node_exec(client, two_nodes, 1, ["cat", "/etc/lab/env"])
    assert code == 0
    env = dict(line.split("=", 1) for line in output.decode().split())
    assert env == {"MASTER_ADDR": "node0", "MASTER_PORT": "29500", "NNODES": "2", "NODE_RANK": "1", "NPROC_PER_NODE": "1"}
    assert list((paths.logs_dir() / two_nodes).glob("provision-*.log"))


def test_same_spec_is_a_no_op(client, two_nodes):
    containers = sorted(c.id for c in labelled(client, two_nodes)[0])
    result = lab_json("up", "--nodes", "2", "--name", two_nodes)
    assert result["changed"] is False
    assert sorted(c.id for c in labelled(client, two_nodes)[0]) == containers


def test_different_spec_refused_then_recreated_then_down_leaves_nothing(client, fresh_name):
    lab("up", "--nodes", "1", "--name", fresh_name, check=True)
    refused = lab("up", "--nodes", "2", "--name", fresh_name)
    assert refused.returncode == 5 and "different spec" in refused.stderr and "--recreate" in refused.stderr
    assert len(labelled(client, fresh_name)[0]) == 1
    recreated = lab_json("up", "--nodes", "2", "--name", fresh_name, "--recreate")
    assert recreated["changed"] and len(recreated["nodes"]) == 2
    assert all(len(objects) >= 1 for objects in labelled(client, fresh_name))
    lab("down", "--name", fresh_name, check=True)
    assert labelled(client, fresh_name) == ([], [], [])
    assert not paths.lab_dir(fresh_name).exists()


def test_down_cleans_up_after_a_crash_by_label(client, fresh_name):
    lab("up", "--nodes", "1", "--name", fresh_name, check=True)
    # Simulate a crash that lost every local file: down must still find everything by label.
    import shutil

    shutil.rmtree(paths.lab_dir(fresh_name))
    client.containers.get(f"lab-{fresh_name}-node0").kill()
    result = lab("down", "--name", fresh_name, check=True)
    assert "1 container(s), 1 network(s), 1 volume(s)" in result.stdout
    assert labelled(client, fresh_name) == ([], [], [])


def test_dry_run_prints_one_plan_every_time_and_creates_nothing(client, fresh_name):
    args = ("up", "--nodes", "2", "--name", fresh_name, "--dry-run", "--json")
    first, second = lab(*args, check=True).stdout, lab(*args, check=True).stdout
    assert first == second
    plan = json.loads(first)["plan"]
    assert [c["name"] for c in plan["containers"]] == [f"lab-{fresh_name}-node0", f"lab-{fresh_name}-node1"]
    assert plan["network"]["name"] == f"lab-{fresh_name}-net" and plan["volume"]["name"] == f"lab-{fresh_name}-shared"
    assert labelled(client, fresh_name) == ([], [], [])
    assert not paths.lab_dir(fresh_name).exists()
