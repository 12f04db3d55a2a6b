"""SSH only on loopback, keys only, unprivileged nodes; proved from a separate network namespace."""

import os
import shutil
import socket
import subprocess
import sys
import uuid

import pytest

from .conftest import lab_json

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
        host_config = container.attrs["HostConfig"]
        assert host_config["Privileged"] is False
        assert not host_config.get("CapAdd")


def test_net_admin_only_when_asked(client, fresh_name):
    lab_json("up", "--nodes", "1", "--name", fresh_name, "--net-admin")
    container = client.containers.get(f"lab-{fresh_name}-node0")
    assert container.attrs["HostConfig"]["CapAdd"] == ["NET_ADMIN"]
    assert container.attrs["HostConfig"]["Privileged"] is False
