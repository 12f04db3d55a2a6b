"""`lab doctor` on real nodes: the pre-job checks pass on a lab as `lab up` makes it, and name what is wrong when a
job's environment or a taken rendezvous port would make it fail."""

import json
import signal

import pytest

from lab.jobs.preflight import MIN_SHM_BYTES
from lab.nodes.labels import NETWORK_OPTIONS

from .conftest import lab, lab_json
from .test_reliability import start_lab

LAB_MTU = int(NETWORK_OPTIONS["com.docker.network.driver.mtu"])
FACTS = {"hostname", "hostname_addresses", "hostname_is_loopback", "shm_bytes", "interfaces", "gloo_interface",
         "gloo_reason", "nccl_interface", "socket_ifname"}


@pytest.mark.docker
def test_a_fresh_lab_passes_every_pre_job_check(two_nodes):
    report = lab_json("doctor", "--name", two_nodes)
    assert report["ok"] and report["master_addr"] == "node0"
    for index, node in enumerate(report["nodes"]):
        preflight = node["preflight"]
        facts, reach = preflight["facts"], preflight["reach"]
        assert preflight["node"] == index and FACTS <= set(facts), facts
        assert not preflight["problems"] and not preflight["warnings"], preflight
        assert facts["hostname"] == f"node{index}" and not facts["hostname_is_loopback"]
        assert facts["shm_bytes"] >= MIN_SHM_BYTES
        assert facts["gloo_interface"] == facts["nccl_interface"] == "eth0"
        assert facts["interfaces"]["eth0"]["mtu"] == LAB_MTU
        assert reach["reached"] is True and reach["port"] == report["master_port"]
        assert reach["rtt_ms"] >= 0 and reach["clock_offset_ms"] is not None


@pytest.mark.docker
def test_a_socket_interface_the_nodes_lack_is_a_problem_on_every_node(two_nodes):
    result = lab("doctor", "--name", two_nodes, "--env", "GLOO_SOCKET_IFNAME=ib0", "--json")
    report = json.loads(result.stdout)
    assert result.returncode == 1 and not report["ok"]
    for index, node in enumerate(report["nodes"]):
        assert node["preflight"]["facts"]["socket_ifname"] == {"GLOO_SOCKET_IFNAME": "ib0"}
        assert node["preflight"]["problems"] == [
            f"GLOO_SOCKET_IFNAME=ib0 on node{index}, which has no interface ib0 with an address (it has lo, eth0)"]


@pytest.mark.docker
def test_a_rendezvous_port_another_process_holds_on_node0_is_named(two_nodes):
    hold = ("import socket, time; s = socket.socket(); s.bind(('', 29555)); s.listen(); print('holding', flush=True);"
            " time.sleep(120)")
    holder = start_lab("exec", "--name", two_nodes, "--node", "0", "--timeout", "120", "--", "python", "-c", hold)
    try:
        assert any("holding" in line for line in holder.stdout), "the holder never bound the port"
        result = lab("doctor", "--name", two_nodes, "--master-port", "29555")
    finally:
        holder.send_signal(signal.SIGINT)  # Ctrl-C: `lab exec` kills its process in node0, freeing the port
        holder.wait(timeout=60)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "node0 cannot listen on the rendezvous port 29555: Address already in use" in result.stdout
    assert "node1 cannot reach" not in result.stdout  # node1 was not tried: the port is node0's problem


def test_doctor_runs_on_this_host_as_processes():
    result = lab("doctor", "--on", "host", "--nodes", "2", "--json")
    report = json.loads(result.stdout)
    assert report["master_addr"] == "127.0.0.1" and report["auto_backend"] is None
    assert [node["preflight"]["reach"]["reached"] for node in report["nodes"]] == [True, True]
    assert all(not node["preflight"]["problems"] for node in report["nodes"])  # loopback is fine on one host
    assert result.returncode == (0 if report["ok"] else 1)
