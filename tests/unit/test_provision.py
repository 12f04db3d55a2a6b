"""lab/provision/ansible.py: the lab's inventory and how ansible-runner's events become node reports."""

import json

from lab.model.spec import LabSpec
import pytest

from lab.provision.ansible import PROBE_TASK, node_reports, write_inventory
from lab import paths

PROBE_OK = {"hostname": "node0", "python": "3.11.2", "torch": "2.13.0+cpu", "backends": ["gloo"], "gpus": [],
            "peers": {"node0": "172.20.0.2", "node1": "172.20.0.3"}, "unresolved": []}


def event(kind, host, task, **result):
    return {"event": kind, "event_data": {"host": host, "task": task, "res": result}}


def probe_output(report):
    # raw runs on a tty: whatever the shell printed first comes before the probe's JSON line
    return {"rc": 0, "stdout_lines": ["Warning: something from the login shell", json.dumps(report)]}


def test_the_probe_task_is_the_one_in_the_playbook():
    assert f"- name: {PROBE_TASK}\n" in (paths.resource("playbooks") / "provision.yml").read_text()


def test_a_node_reports_its_probe_facts():
    [report] = node_reports([event("runner_on_start", "node0", PROBE_TASK),
                             event("runner_on_ok", "node0", PROBE_TASK, **probe_output(PROBE_OK))])
    assert report.ok and report.facts["probe"]["torch"] == "2.13.0+cpu"
    assert report.summary() == "node0: python 3.11.2, torch 2.13.0+cpu, backends gloo, 0 GPU(s), peers all resolve"


def test_failures_name_what_the_probe_found_or_what_ansible_said():
    unresolved = {**PROBE_OK, "peers": {"node0": "172.20.0.2", "node1": None}, "unresolved": ["node1"]}
    no_torch = {**PROBE_OK, "torch": None, "executable": "/usr/bin/python3", "error": "No module named 'torch'"}
    reports = node_reports([
        event("runner_on_failed", "node0", PROBE_TASK, failed_when_result=True, **probe_output(unresolved)),
        event("runner_on_failed", "node1", PROBE_TASK, failed_when_result=True, **probe_output(no_torch)),
        event("runner_on_failed", "node2", PROBE_TASK, rc=127, msg="non-zero return code",
              stdout="/bin/sh: 1: /opt/venv/bin/python: not found\r\n", stdout_lines=["/bin/sh: 1: /opt/venv/bin/python: not found"]),
        event("runner_on_unreachable", "node3", "Wait for connection", msg="Failed to connect to the host via ssh: refused"),
        {"event": "runner_on_failed", "event_data": {"host": "node4", "task": PROBE_TASK, "res": {}, "ignore_errors": True}},
    ])
    assert [(r.host, r.ok) for r in reports] == [("node0", False), ("node1", False), ("node2", False), ("node3", False)]
    assert reports[0].error == f"at '{PROBE_TASK}': peers do not resolve: node1"
    assert reports[0].summary().endswith("peers do not resolve: node1")
    assert reports[1].error.endswith("torch missing under /usr/bin/python3: No module named 'torch'")
    assert reports[2].error.endswith("/bin/sh: 1: /opt/venv/bin/python: not found")
    assert reports[3].error == "at 'Wait for connection': Failed to connect to the host via ssh: refused"


def test_lab_inventory_skips_the_wait_and_reuses_one_connection_per_node(tmp_path):
    text = write_inventory(LabSpec(name="t1", nodes=3), {0: 2201, 1: 2202, 2: 2203}, tmp_path / "key",
                           tmp_path / "known_hosts", tmp_path / "inventory").read_text()
    assert "node2 ansible_host=127.0.0.1 ansible_port=2203 node_rank=2" in text
    assert "[lab_ssh_ready:children]\nlab\n" in text  # provision.yml's wait play skips these hosts
    assert "ansible_ssh_args='-o ControlMaster=auto -o ControlPersist=60s'" in text
    assert "lab_peers=['node0','node1','node2']" in text


@pytest.mark.parametrize("nproc, slots", [(None, 2), (4, 4)])
def test_lab_inventory_names_the_hostfiles_hosts_and_slots(tmp_path, nproc, slots):
    text = write_inventory(LabSpec(name="t1", nodes=2, nproc_per_node=nproc), {0: 2201, 1: 2202}, tmp_path / "key",
                           tmp_path / "known_hosts", tmp_path / "inventory").read_text()
    assert "lab_hosts=['node0','node1']" in text and f"hostfile_slots={slots}" in text


def test_lab_inventory_accepts_only_the_pinned_host_keys(tmp_path):
    text = write_inventory(LabSpec(name="t1", nodes=2), {0: 2201, 1: 2202}, tmp_path / "key",
                           tmp_path / "known_hosts", tmp_path / "inventory").read_text()
    assert (f"ansible_ssh_common_args='-o StrictHostKeyChecking=yes -o UserKnownHostsFile={tmp_path}/known_hosts "
            "-o HostKeyAlgorithms=ssh-ed25519 -o LogLevel=ERROR'") in text
    assert "ansible_host_key_checking=true" in text  # false would put StrictHostKeyChecking=no ahead of these
    assert "StrictHostKeyChecking=no" not in text and "/dev/null" not in text
