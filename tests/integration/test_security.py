"""SSH only on loopback, keys only, pinned host keys; nodes with least privilege; proved from outside the nodes."""

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid

import pytest

from lab import paths

from .conftest import lab, lab_json

pytestmark = pytest.mark.docker

CONNECT = ("import socket, sys\n"
           "try:\n"
           "    socket.create_connection((sys.argv[1], int(sys.argv[2])), 3).close(); print('open')\n"
           "except OSError as error:\n"
           "    print('closed', error)\n")


@pytest.fixture
def outside_host():
    """A network namespace joined to this host by a veth pair: a machine 'outside loopback', made for the test."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("needs root and iproute2 to make a network namespace")
    tag = uuid.uuid4().hex[:6]
    namespace, host_end, inner_end = f"labsec{tag}", f"lsh{tag}", f"lsi{tag}"
    subnet = f"10.{200 + int(tag[:2], 16) % 50}.{int(tag[2:4], 16)}"
    host_ip, inner_ip = f"{subnet}.1", f"{subnet}.2"
    commands = [
        ["ip", "netns", "add", namespace],
        ["ip", "link", "add", host_end, "type", "veth", "peer", "name", inner_end],
        ["ip", "link", "set", inner_end, "netns", namespace],
        ["ip", "addr", "add", f"{host_ip}/30", "dev", host_end],
        ["ip", "link", "set", host_end, "up"],
        ["ip", "netns", "exec", namespace, "ip", "addr", "add", f"{inner_ip}/30", "dev", inner_end],
        ["ip", "netns", "exec", namespace, "ip", "link", "set", inner_end, "up"],
        ["ip", "netns", "exec", namespace, "ip", "link", "set", "lo", "up"],
    ]
    try:
        for command in commands:
            subprocess.run(command, check=True, capture_output=True)
        yield namespace, host_ip
    finally:
        subprocess.run(["ip", "link", "del", host_end], capture_output=True)
        subprocess.run(["ip", "netns", "del", namespace], capture_output=True)


def connect_from(namespace, address, port):
    result = subprocess.run(["ip", "netns", "exec", namespace, sys.executable, "-c", CONNECT, address, str(port)],
                            capture_output=True, text=True, timeout=30)
    return result.stdout.strip()


def test_ssh_not_reachable_from_outside_loopback(outside_host, two_nodes):
    namespace, host_ip = outside_host
    ports = [node["ssh_port"] for node in lab_json("status", "--name", two_nodes)[two_nodes]["nodes"]]
    # Control: a listener on every address of this host is reachable from the namespace, so the path works.
    with socket.socket() as control:
        control.bind(("0.0.0.0", 0))
        control.listen()
        assert connect_from(namespace, host_ip, control.getsockname()[1]) == "open"
    for port in ports:
        assert connect_from(namespace, host_ip, port).startswith("closed")
        with socket.create_connection(("127.0.0.1", port), 5) as local:
            assert local.recv(8).startswith(b"SSH-2.0")


def test_sshd_refuses_passwords_and_nodes_are_unprivileged(client, two_nodes):
    for index in range(2):
        container = client.containers.get(f"lab-{two_nodes}-node{index}")
        code, output = container.exec_run(["/usr/sbin/sshd", "-T"])
        settings = dict(line.split(" ", 1) for line in output.decode().splitlines() if " " in line)
        assert code == 0
        assert settings["passwordauthentication"] == "no"
        assert settings["kbdinteractiveauthentication"] == "no"
        assert settings["permitrootlogin"] == "without-password"


# What sshd and the exercises need (README "Security"); every other capability is dropped. Bit numbers: linux/capability.h.
NODE_CAPS = {"DAC_OVERRIDE": 1, "SETGID": 6, "SETUID": 7, "SYS_CHROOT": 18, "AUDIT_WRITE": 29}
NET_ADMIN_BIT = 12


def capability_mask(names):
    return sum(1 << bit for name, bit in {**NODE_CAPS, "NET_ADMIN": NET_ADMIN_BIT}.items() if name in names)


def assert_least_privilege(container, extra=()):
    """Everything dropped but the node's list (+ extra), no new privileges, a pids limit, nothing of the host's."""
    host_config = container.attrs["HostConfig"]
    assert host_config["CapDrop"] == ["ALL"]
    assert sorted(host_config["CapAdd"]) == sorted([*NODE_CAPS, *extra])
    assert host_config["SecurityOpt"] == ["no-new-privileges"]
    assert host_config["PidsLimit"] == 4096
    assert host_config["Privileged"] is False
    assert host_config["NetworkMode"] != "host" and host_config["PidMode"] != "host"
    assert host_config["IpcMode"] != "host" and host_config["UsernsMode"] != "host"
    mounted = [mount["Source"] for mount in container.attrs["Mounts"]] + list(host_config.get("Binds") or [])
    assert not [source for source in mounted if "docker.sock" in source or source.startswith("/var/run/docker")]
    # In force inside, for every process a node starts (sshd, ansible, the exercises, `docker exec`).
    code, output = container.exec_run(["sh", "-c", "grep -E 'CapBnd|NoNewPrivs' /proc/self/status; "
                                                   "cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max 2>/dev/null"])
    status = dict(line.split(":\t") for line in output.decode().splitlines() if ":\t" in line)
    assert int(status["CapBnd"], 16) == capability_mask([*NODE_CAPS, *extra])
    assert status["NoNewPrivs"] == "1"
    assert output.decode().split()[-1] == "4096"


def test_every_node_has_least_privilege(client, two_nodes):
    containers = client.containers.list(all=True, filters={"label": [f"io.lab.lab={two_nodes}"]})
    assert len(containers) == 2
    for container in containers:
        assert_least_privilege(container)
    plan = lab_json("up", "--nodes", "2", "--name", two_nodes, "--dry-run")["plan"]
    for planned in plan["containers"]:  # what `lab up --dry-run --json` shows is what the nodes got
        assert (planned["cap_drop"], sorted(planned["cap_add"]), planned["security_opt"], planned["pids_limit"]) == (
            ["ALL"], sorted(NODE_CAPS), ["no-new-privileges"], 4096)


def test_net_admin_only_when_asked(client, fresh_name):
    lab_json("up", "--nodes", "1", "--name", fresh_name, "--net-admin")
    assert_least_privilege(client.containers.get(f"lab-{fresh_name}-node0"), extra=["NET_ADMIN"])


def test_known_hosts_pins_every_node_and_a_changed_host_key_is_refused(client, fresh_name):
    nodes = lab_json("up", "--nodes", "2", "--name", fresh_name)["nodes"]
    known_hosts = paths.lab_dir(fresh_name) / "ssh" / "known_hosts"
    pinned = {line.split()[0]: line.split()[1:] for line in known_hosts.read_text().splitlines()}
    for node in nodes:
        container = client.containers.get(f"lab-{fresh_name}-node{node['index']}")
        key = container.exec_run(["cat", "/etc/ssh/ssh_host_ed25519_key.pub"]).output.decode().split()[:2]
        assert pinned[f"[127.0.0.1]:{node['ssh_port']},{node['hostname']}"] == key
    inventory = (paths.lab_dir(fresh_name) / "inventory").read_text()
    assert f"-o StrictHostKeyChecking=yes -o UserKnownHostsFile={known_hosts}" in inventory
    # node1 gets a new host key, and its sshd (re-executed by SIGHUP) serves it.
    node1 = client.containers.get(f"lab-{fresh_name}-node1")
    code, output = node1.exec_run(["sh", "-c", "rm -f /etc/ssh/ssh_host_* && ssh-keygen -A && kill -HUP $(cat /run/sshd.pid)"])
    assert code == 0, output
    # ansible keeps its connection from `lab up` for a minute, and a connection made under the old key goes on
    # working: end those sessions (by pid) so that provisioning connects anew.
    node1.exec_run(["sh", "-c", "ps -eo pid=,args= | awk '$2 == \"sshd:\" && $3 ~ /^root@/ {print $1}' | xargs -r kill"])
    port = nodes[1]["ssh_port"]
    wait_for_new_key(port, pinned[f"[127.0.0.1]:{port},node1"][1])
    result = lab("provision", "--name", fresh_name)
    assert result.returncode == 6, result.stdout + result.stderr
    error, hint = [line for line in result.stderr.splitlines() if line.startswith(("error:", "hint:"))]
    assert error.startswith(f"error: node1's SSH host key changed: 127.0.0.1:{port} no longer presents the key pinned in")
    assert str(known_hosts) in error and "Traceback" not in result.stderr
    assert hint.startswith("hint: if you re-keyed node1 yourself, `lab down` and `lab up` pin new keys")
    assert known_hosts.read_text().splitlines()[1].split()[1:] == pinned[f"[127.0.0.1]:{port},node1"]  # not re-pinned


def wait_for_new_key(port, old_key):
    """Until sshd on `port` serves a host key other than `old_key` (it restarts after SIGHUP)."""
    for _ in range(100):
        scan = subprocess.run(["ssh-keyscan", "-t", "ed25519", "-p", str(port), "127.0.0.1"], capture_output=True,
                              text=True, timeout=30)
        served = [line.split()[2] for line in scan.stdout.splitlines() if line.startswith(f"[127.0.0.1]:{port} ")]
        if served and served[0] != old_key:
            return
        time.sleep(0.2)
    raise AssertionError(f"sshd on {port} still serves its old key")
