"""The pre-job rules of `lab doctor`, from plain facts, and the node-side script itself on this host."""

import json
import subprocess
import sys
import threading

from lab.jobs.preflight import SCRIPT, NodePreflight, judge_preflight


def healthy(index: int, mtu: int = 65520) -> NodePreflight:
    facts = {"hostname": f"node{index}", "hostname_addresses": [f"10.9.0.{index + 2}"], "hostname_is_loopback": False,
             "shm_bytes": 1024**3, "gloo_interface": "eth0", "nccl_interface": "eth0", "socket_ifname": {},
             "interfaces": {"eth0": {"addresses": [f"10.9.0.{index + 2}"], "mtu": mtu},
                            "lo": {"addresses": ["127.0.0.1"], "mtu": 65536}}}
    return NodePreflight(index, facts, {"reached": True, "rtt_ms": 0.2, "clock_offset_ms": 0.1})


def test_a_healthy_lab_has_no_problem_and_no_warning():
    nodes = judge_preflight([healthy(0), healthy(1)], "node0", 29500)
    assert all(not node.problems and not node.warnings for node in nodes)
    assert nodes[0].interface_text("gloo_interface") == "eth0 (MTU 65520)"


def test_hostname_on_loopback_is_a_problem_of_that_node_only():
    bad = healthy(1)
    bad.facts.update(hostname_addresses=["127.0.1.1"], hostname_is_loopback=True)
    nodes = judge_preflight([healthy(0), bad], "node0", 29500)
    assert not nodes[0].problems
    assert "node1's own hostname node1 resolves to a loopback address (127.0.1.1)" in nodes[1].problems[0]


def test_socket_ifname_naming_a_missing_interface():
    bad = healthy(0)
    bad.facts["socket_ifname"] = {"GLOO_SOCKET_IFNAME": "ib0"}
    problems = judge_preflight([bad, healthy(1)], "node0", 29500)[0].problems
    assert problems == ["GLOO_SOCKET_IFNAME=ib0 on node0, which has no interface ib0 (it has eth0, lo)"]
    excluded = healthy(0)
    excluded.facts["socket_ifname"] = {"NCCL_SOCKET_IFNAME": "^docker,lo"}
    assert not judge_preflight([excluded], "node0", 29500)[0].problems


def test_unreachable_rendezvous_small_shm_clock_offset_and_mtu_mismatch():
    cut = healthy(1, mtu=1500)
    cut.reach = {"reached": False, "error": "Connection refused"}
    cut.facts["shm_bytes"] = 64 * 1024**2
    skewed = healthy(0)
    skewed.reach["clock_offset_ms"] = 1200.0
    nodes = judge_preflight([skewed, cut], "node0", 29511)
    assert nodes[1].problems == ["node1 cannot reach the rendezvous node0:29511: Connection refused"]
    assert any("/dev/shm on node1 is 64 MiB" in warning for warning in nodes[1].warnings)
    assert any("node0's clock is +1200 ms off" in warning for warning in nodes[0].warnings)
    assert all(any("MTU differs between nodes (node0: 65520, node1: 1500)" in w for w in n.warnings) for n in nodes)


def test_a_node_whose_script_failed_says_so():
    node = NodePreflight(0, {"error": "python3: not found"})
    assert judge_preflight([node], "node0", 29500)[0].problems == ["pre-job checks could not run: python3: not found"]


def run_script(*args: str) -> dict:
    output = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=30).stdout
    return json.loads(output.strip().splitlines()[-1])


def test_the_node_script_reports_facts_and_measures_a_round_trip_on_this_host():
    facts = run_script("facts")
    assert facts["hostname"] and "lo" in facts["interfaces"]
    probe = subprocess.run([sys.executable, "-c", "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); "
                            "print(s.getsockname()[1])"], capture_output=True, text=True).stdout.strip()
    port = int(probe)
    listener = threading.Thread(target=run_script, args=("listen", str(port), "1", "10"))
    listener.start()
    reach = run_script("connect", "127.0.0.1", str(port), "10")
    listener.join()
    assert reach["reached"] is True and reach["rtt_ms"] >= 0 and abs(reach["clock_offset_ms"]) < 100
    assert run_script("connect", "127.0.0.1", str(port), "1")["reached"] is False
