"""Pinned SSH host keys (lab/nodes/sshkeys.py, lifecycle.pin_host_keys): written from the engine, refused when changed."""

from pathlib import Path

import pytest

from lab import paths
from lab.errors import ProvisionError
from lab.nodes.driver import NodeState
from lab.nodes.lifecycle import pin_host_keys, refuse_unpinned_host_keys
from lab.nodes.sshkeys import known_hosts_path, known_names, write_known_hosts
from lab.provision.ansible import NodeReport, ProvisionResult

KEYS = {0: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK0 root@buildkitsandbox",
        1: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK1 root@buildkitsandbox"}


class KeyReader:
    """The driver's one call that pinning makes: each node's host public key, as `cat` in the node prints it."""

    def host_public_key(self, name, index):
        return KEYS[index]


def node(index, port):
    return NodeState(index, f"node{index}", f"lab-demo-node{index}", "running", None, port, None, None)


def test_keys_are_pinned_for_the_loopback_port_and_the_node_name(own_lab_home):
    pin_host_keys("demo", [node(0, 33001), node(1, 33002)], KeyReader())
    known_hosts = known_hosts_path(paths.lab_dir("demo") / "ssh")
    assert known_hosts.read_text() == ("[127.0.0.1]:33001,node0 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK0\n"
                                       "[127.0.0.1]:33002,node1 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK1\n")
    assert known_names(known_hosts) == {"[127.0.0.1]:33001", "node0", "[127.0.0.1]:33002", "node1"}
    # A node restarted on another port: pinning again replaces the file, old ports are not kept.
    pin_host_keys("demo", [node(0, 33001), node(1, 34000)], KeyReader())
    assert "[127.0.0.1]:33002" not in known_names(known_hosts) and "[127.0.0.1]:34000" in known_names(known_hosts)


def test_no_known_hosts_file_pins_nothing(tmp_path):
    assert known_names(tmp_path / "missing") == set()


REFUSED = ("at 'Write /etc/lab/env and probe python, torch, GPUs and peers': Task failed: Failed to connect to the host "
           "via ssh: Host key verification failed.")


def result_with(error):
    return ProvisionResult([NodeReport("node0", True), NodeReport("node1", False, error=error)], Path("/log"), 1.0)


def test_a_changed_key_is_one_line_naming_the_node_and_its_pinned_file(tmp_path):
    known_hosts = tmp_path / "known_hosts"
    write_known_hosts(known_hosts, {("[127.0.0.1]:33002", "node1"): KEYS[1]})
    with pytest.raises(ProvisionError) as refused:
        refuse_unpinned_host_keys(result_with(REFUSED), [node(0, 33001), node(1, 33002)], known_hosts)
    assert refused.value.message == (f"node1's SSH host key changed: 127.0.0.1:33002 no longer presents the key pinned "
                                     f"in {known_hosts} when the node started; ssh refused it")
    assert refused.value.hint.startswith("if you re-keyed node1 yourself, `lab down` and `lab up` pin new keys")


def test_a_node_without_a_pinned_key_is_told_so(tmp_path):
    known_hosts = tmp_path / "known_hosts"
    write_known_hosts(known_hosts, {("[127.0.0.1]:33001", "node0"): KEYS[0]})
    with pytest.raises(ProvisionError, match=r"node1's SSH host key is not pinned: .* has no key for 127.0.0.1:33002"):
        refuse_unpinned_host_keys(result_with(REFUSED), [node(0, 33001), node(1, 33002)], known_hosts)


def test_other_provisioning_failures_are_left_to_the_usual_message(tmp_path):
    refuse_unpinned_host_keys(result_with("at 'probe': torch missing under /usr/bin/python3"),
                              [node(0, 33001), node(1, 33002)], tmp_path / "known_hosts")


def test_a_key_the_node_makes_as_it_first_starts_is_waited_for_and_a_missing_one_is_an_error(monkeypatch):
    """User and host images make the key when the node starts; on a loaded machine `cat` can come first."""
    from lab.nodes import driver as driver_module
    answers = iter([(1, "cat: /etc/ssh/ssh_host_ed25519_key.pub: No such file"), (0, ""), (0, KEYS[0] + "\n")])
    reader = object.__new__(driver_module.DockerDriver)
    monkeypatch.setattr(reader, "exec_output", lambda name, index, argv: next(answers), raising=False)
    assert reader.host_public_key("demo", 0) == KEYS[0]
    monkeypatch.setattr(driver_module, "HOST_KEY_WAIT_S", 0.3)
    monkeypatch.setattr(reader, "exec_output", lambda name, index, argv: (1, "No such file"), raising=False)
    with pytest.raises(ProvisionError, match="node0 has no SSH host key"):
        reader.host_public_key("demo", 0)
