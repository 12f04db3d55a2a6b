"""The pre-job rules of `lab doctor`, from plain facts, and the node-side script itself on this host."""

import importlib.util
import json
import socket
import subprocess
import sys
import threading
from types import SimpleNamespace

import pytest

from lab.jobs.doctor import peer_names
from lab.jobs.preflight import MIN_SHM_BYTES, SCRIPT, NodePreflight, judge_preflight, run_preflight
from lab.jobs.targets import Target
from lab.jobs.transports import LocalTransport
from lab.model.spec import LabSpec
from lab.nodes.gpus import HostGpus
from lab.nodes.plan import HostFacts, build_plan


def healthy(index: int, mtu: int = 65520) -> NodePreflight:
    facts = {"hostname": f"node{index}", "hostname_addresses": [f"10.9.0.{index + 2}"], "hostname_is_loopback": False,
             "shm_bytes": 1024**3, "gloo_interface": "eth0", "gloo_reason": "hostname", "nccl_interface": "eth0",
             "socket_ifname": {},
             "interfaces": {"eth0": {"addresses": [f"10.9.0.{index + 2}"], "mtu": mtu},
                            "lo": {"addresses": ["127.0.0.1"], "mtu": 65536}}}
    return NodePreflight(index, facts, {"reached": True, "rtt_ms": 0.2, "clock_offset_ms": 0.1})


def test_a_healthy_lab_has_no_problem_and_no_warning():
    nodes = judge_preflight([healthy(0), healthy(1)], "node0", 29500)
    assert all(not node.problems and not node.warnings for node in nodes)
    assert nodes[0].interface_text("gloo_interface") == "eth0 (MTU 65520)"
    assert (nodes[0].reach_text(), nodes[0].clock_text()) == ("yes (0.20 ms)", "+0.10 ms")


def test_hostname_on_loopback_is_a_problem_of_that_node_only():
    bad = healthy(1)
    bad.facts.update(hostname_addresses=["127.0.1.1"], hostname_is_loopback=True)
    nodes = judge_preflight([healthy(0), bad], "node0", 29500)
    assert not nodes[0].problems
    assert "node1's own hostname node1 resolves to a loopback address (127.0.1.1)" in nodes[1].problems[0]


def test_on_one_host_a_loopback_hostname_and_loopback_interfaces_are_fine():
    node = healthy(0)
    node.facts.update(hostname_addresses=["127.0.0.1"], hostname_is_loopback=True, gloo_interface="lo",
                      nccl_interface="lo")
    judged = judge_preflight([node], "127.0.0.1", 29500)[0]
    assert not judged.problems and not judged.warnings


def test_gloo_falling_back_to_loopback_or_told_to_use_it_is_a_problem_and_nccl_on_loopback_a_warning():
    fallback = healthy(0)
    fallback.facts.update(hostname_addresses=[], gloo_interface="lo", gloo_reason="loopback fallback")
    told = healthy(1)
    told.facts.update(gloo_interface="lo", gloo_reason="GLOO_SOCKET_IFNAME", nccl_interface="lo",
                      socket_ifname={"GLOO_SOCKET_IFNAME": "lo"})
    nodes = judge_preflight([fallback, told, healthy(2)], "node0", 29500)
    assert nodes[0].problems == ["node0's own hostname node0 resolves to no address of node0 (nothing): gloo falls "
                                 "back to loopback and peers could not connect; add it to /etc/hosts or set "
                                 "GLOO_SOCKET_IFNAME"]
    assert nodes[1].problems == ["GLOO_SOCKET_IFNAME=lo on node1 is loopback: peers could not connect"]
    assert nodes[1].warnings[0].startswith("NCCL would use lo on node1")
    assert not nodes[0].warnings and not nodes[2].warnings  # loopback's MTU is no MTU mismatch between nodes


def test_socket_ifname_naming_a_missing_interface():
    bad = healthy(0)
    bad.facts.update(socket_ifname={"GLOO_SOCKET_IFNAME": "eth0,ib0", "NCCL_SOCKET_IFNAME": "=ib"},
                     gloo_interface="eth0", gloo_reason="GLOO_SOCKET_IFNAME", nccl_interface=None)
    problems = judge_preflight([bad, healthy(1)], "node0", 29500)[0].problems
    assert problems == ["GLOO_SOCKET_IFNAME=eth0,ib0 on node0, which has no interface ib0 with an address "
                        "(it has eth0, lo)",
                        "NCCL_SOCKET_IFNAME==ib on node0 matches none of its interfaces (eth0, lo): NCCL would find "
                        "no socket interface"]
    excluded = healthy(0)
    excluded.facts["socket_ifname"] = {"NCCL_SOCKET_IFNAME": "^docker,lo"}
    assert not judge_preflight([excluded], "node0", 29500)[0].problems


def test_a_port_node0_cannot_listen_on_is_node0s_problem_alone():
    taken, other = healthy(0), healthy(1)
    taken.reach = {"reached": None, "listen_error": "Address already in use"}
    other.reach = {"reached": None, "error": "not tried: node0 could not listen on port 29500"}
    nodes = judge_preflight([taken, other], "node0", 29500)
    assert nodes[0].problems[0].startswith("node0 cannot listen on the rendezvous port 29500: Address already in use")
    assert not nodes[1].problems
    assert (nodes[0].reach_text(), nodes[1].reach_text(), nodes[1].clock_text()) == ("no", "-", "-")


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
    assert judge_preflight([node], "node0", 29500)[0].problems == ["pre-job checks could not run on node0: "
                                                                    "python3: not found"]


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


def load_node_script():
    spec = importlib.util.spec_from_file_location("node_preflight", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


INTERFACES = {"lo": {"addresses": ["127.0.0.1"]}, "docker0": {"addresses": ["172.17.0.1"]},
              "eth0": {"addresses": ["10.0.0.5"]}, "ib0": {"addresses": ["10.1.0.5"]}}


@pytest.mark.parametrize("variable, picked", [
    (None, "ib0"),  # NCCL looks for InfiniBand first
    ("eth", "eth0"),
    ("^ib,lo", "docker0"),  # the kernel's order: docker0 comes before eth0 here
    ("=eth", None),  # '=' wants the exact name
    ("^=ib0,lo,docker0,eth0", None),  # one "=" for the whole list, as NCCL reads it
])
def test_nccl_picks_its_interface_the_way_nccl_does(monkeypatch, variable, picked):
    if variable is None:
        monkeypatch.delenv("NCCL_SOCKET_IFNAME", raising=False)
    else:
        monkeypatch.setenv("NCCL_SOCKET_IFNAME", variable)
    assert load_node_script().nccl_choice(INTERFACES) == picked


def test_gloo_uses_the_first_hostname_address_it_can_bind_else_loopback(monkeypatch):
    node = load_node_script()
    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    assert node.gloo_choice(["127.0.1.1"], INTERFACES) == ("lo", "hostname")
    assert node.gloo_choice(["192.0.2.254"], INTERFACES) == ("lo", "loopback fallback")  # not an address of this host
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "ib0,eth0")
    assert node.gloo_choice(["127.0.1.1"], INTERFACES) == ("ib0", "GLOO_SOCKET_IFNAME")


def test_run_preflight_on_this_host_reaches_node0_and_reports_a_port_already_taken(tmp_path):
    transport = LocalTransport(tmp_path, tmp_path)
    nodes = run_preflight(transport, 2, transport.pick_port(), {"NCCL_SOCKET_IFNAME": "lo"})
    assert [node.reach["reached"] for node in nodes] == [True, True]
    assert all(not node.problems for node in nodes), [node.problems for node in nodes]
    assert nodes[0].facts["socket_ifname"] == {"NCCL_SOCKET_IFNAME": "lo"} and nodes[0].facts["nccl_interface"] == "lo"
    with socket.socket() as holder:
        holder.bind(("", 0))
        holder.listen()
        port = holder.getsockname()[1]
        nodes = run_preflight(transport, 2, port)
    assert nodes[0].reach["listen_error"] and "cannot listen on the rendezvous port" in nodes[0].problems[0]
    assert nodes[1].reach["reached"] is None and not nodes[1].problems


def test_doctor_resolves_the_nodes_hostnames_or_on_real_hosts_how_they_reach_node0():
    lab = Target(SimpleNamespace(master_addr="node0"), ("node0", "node1"), "lab1")
    assert peer_names(lab) == ["node0", "node1"]
    assert peer_names(Target(SimpleNamespace(master_addr="127.0.0.1"), ("vm", "vm"), "local")) == ["vm"]
    real = Target(SimpleNamespace(master_addr="10.0.0.1"), ("n0", "n1"), "inventory-hosts", inventory=object())
    assert peer_names(real) == ["10.0.0.1"]  # inventory names are this machine's aliases, unknown to the hosts


def test_the_lab_gives_every_node_the_shm_the_checks_want(tmp_path):
    facts = HostFacts(gpus=HostGpus(), image="lab-node:test", shared_dir=tmp_path, exercises_dir=tmp_path,
                      public_key=tmp_path / "key.pub", python=None, host_folders=())
    plan = build_plan(LabSpec(name="shm", nodes=3), facts)
    assert all(container.shm_size >= MIN_SHM_BYTES for container in plan.containers)
