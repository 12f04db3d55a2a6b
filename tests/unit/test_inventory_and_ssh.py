"""Graduation without Docker: inventory parsing, the SSH transport (through a fake `ssh`), the Slurm export."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from lab.cli import cli
from lab.errors import RunError, SpecError
from lab.provision.inventory import ansible_inventory, parse_inventory
from lab.jobs.transports import SshHost, SshTransport, remote_command

# Stands in for `ssh`: drops the options and the destination, runs the remote command with sh locally.
FAKE_SSH = """#!/usr/bin/env python3
import os, sys
args = sys.argv[1:]
with_value = {"-o", "-p", "-i", "-l", "-F"}
while args and args[0].startswith("-"):
    args = args[2:] if args[0] in with_value else args[1:]
if args[0].split("@")[-1] == "unreachable":
    sys.stderr.write("ssh: connect to host unreachable: Connection refused\\n")
    sys.exit(255)
os.execvp("sh", ["sh", "-c", args[1]])
"""


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_nodes_group_vars_and_overrides(tmp_path):
    key = write(tmp_path / "key", "k")
    inventory = parse_inventory(write(tmp_path / "hosts.ini", f"""
# comment
[other]
gateway ansible_host=10.0.0.9

[nodes]
a ansible_host=10.0.0.1 ansible_port=2222 lab_python=/venv/bin/python
b ansible_host=10.0.0.2 ansible_ssh_common_args='-o StrictHostKeyChecking=no -o LogLevel=ERROR'

[nodes:vars]
ansible_user=ubuntu
ansible_ssh_private_key_file={key}
lab_shared_dir = "/scratch/lab"

[all:vars]
ansible_user=root
master_addr=a.cluster
"""))
    assert [name for name, _ in inventory.hosts] == ["a", "b"]
    assert inventory.python == "/venv/bin/python" and inventory.master_addr == "a.cluster"
    a, b = inventory.ssh_hosts()
    assert (a.address, a.port, a.user, a.key) == ("10.0.0.1", 2222, "ubuntu", key)
    assert b.port == 22 and b.ssh_options == ("-o", "StrictHostKeyChecking=no", "-o", "LogLevel=ERROR")
    argv = a.ssh_argv()
    assert argv[0] == "ssh" and "BatchMode=yes" in argv and argv[-1] == "ubuntu@10.0.0.1"
    assert argv[argv.index("-p") + 1] == "2222" and argv[argv.index("-i") + 1] == str(key)
    assert inventory.var(1, "lab_shared_dir") == "/scratch/lab" and inventory.label == "inventory-hosts"


def test_without_nodes_group_every_host_in_order(tmp_path):
    inventory = parse_inventory(write(tmp_path / "My Hosts.ini", "z1\n[g]\ny2 ansible_host=h2\nz1\n[g:children]\nsub\n"))
    assert [name for name, _ in inventory.hosts] == ["z1", "y2"]
    assert inventory.master_addr == "z1" and inventory.python == "python3" and inventory.label == "inventory-my-hosts"


@pytest.mark.parametrize("text, message", [
    ("", "lists no hosts"),
    ("[nodes]\n", "lists no hosts"),
    ("[nodes]\na ansible_port=x\n", "ansible_port='x'"),
    ("[nodes]\na ansible_port=70000\n", "ansible_port='70000'"),
    ("[nodes]\na novalue\n", "'novalue' is not key=value"),
    ("[nodes]\na 'unclosed\n", "hosts.ini:2"),
    ("[nodes:vars]\njustakey\n", "is not key=value"),
    ("[nodes\na\n", "not a section header"),
    ("[nodes]\na ansible_ssh_private_key_file=/no/such/key\n", "does not exist"),
])
def test_bad_inventory_is_one_spec_error(tmp_path, text, message):
    with pytest.raises(SpecError) as caught:
        parse_inventory(write(tmp_path / "hosts.ini", text))
    assert message in caught.value.message and "\n" not in caught.value.message


def test_unreadable_inventory(tmp_path):
    with pytest.raises(SpecError, match="cannot read inventory"):
        parse_inventory(tmp_path / "missing.ini")
    with pytest.raises(SpecError, match="cannot read inventory"):
        parse_inventory(tmp_path)


def test_playbook_inventory_adds_what_the_playbook_needs(tmp_path):
    inventory = parse_inventory(write(tmp_path / "hosts.ini",
                                      "[nodes]\nn0 ansible_host=127.0.0.1 ansible_port=2201 ansible_user=root\n"
                                      "n1 ansible_host=127.0.0.1 ansible_port=2202 ansible_user=root\n"
                                      "[nodes:vars]\nmaster_addr=node0\nansible_python_interpreter=/opt/py\n"))
    document = yaml.safe_load(ansible_inventory(inventory, 2, tmp_path / "out" / "inventory.yml").read_text())
    hosts = document["all"]["hosts"]
    assert hosts["n1"] == {"ansible_host": "127.0.0.1", "ansible_port": 2202, "ansible_user": "root",
                           "ansible_python_interpreter": "/opt/py", "node_rank": 1}
    assert document["all"]["vars"] == {"lab_python": "/opt/py", "nnodes": 2, "nproc_per_node": 2,
                                       "master_addr": "node0", "master_port": 29500, "lab_peers": ["node0"]}


def test_remote_command_survives_the_shell(tmp_path):
    program = "import os, sys; print(os.getcwd(), os.environ['X'], sys.argv[1:])"
    line = remote_command([sys.executable, "-c", program, "a b", "$HOME"], {"X": "it's $1"}, str(tmp_path / "new dir"))
    output = subprocess.run(["sh", "-c", line], capture_output=True, text=True, check=True).stdout
    assert output.strip() == f"{tmp_path / 'new dir'} it's $1 ['a b', '$HOME']"


@pytest.fixture
def fake_ssh(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ssh = write(bin_dir / "ssh", FAKE_SSH)
    ssh.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def ssh_transport(tmp_path, address="node"):
    remote = tmp_path / "remote"
    return SshTransport([SshHost("n0", address, user="root")], tmp_path / "host", sys.executable, "/ex",
                        str(remote), "127.0.0.1")


def test_results_are_copied_back_after_the_process_ends(tmp_path, fake_ssh):
    transport = ssh_transport(tmp_path)
    results = f"{transport.shared_dir}/runs/r1/results/main"
    process = transport.start(0, ["sh", "-c", 'mkdir -p "$LAB_RESULTS_DIR" && echo "{\\"node\\": $LAB_NODE}" > '
                                              '"$LAB_RESULTS_DIR/rank0.json" && echo done'],
                              {"LAB_RESULTS_DIR": results, "LAB_RUN_ID": "r1-main"})
    assert list(process.lines()) == ["done"] and process.wait() == 0
    assert (tmp_path / "host/runs/r1/results/main/rank0.json").read_text().strip() == '{"node": 0}'


def test_push_copies_a_staged_folder_to_every_host(tmp_path, fake_ssh):
    transport = ssh_transport(tmp_path)
    staged = tmp_path / "host" / "runs" / "r3" / "work" / "project"
    staged.mkdir(parents=True)
    (staged / "train.py").write_text("print('hi')\n")
    transport.push("runs/r3/work")
    assert (Path(transport.shared_dir) / "runs/r3/work/project/train.py").read_text() == "print('hi')\n"
    with pytest.raises(RunError, match="cannot copy runs/r3/work to n0"):
        ssh_transport(tmp_path, "unreachable").push("runs/r3/work")


def test_kill_finds_the_run_by_its_environment(tmp_path, fake_ssh):
    transport = ssh_transport(tmp_path)
    process = transport.start(0, [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"],
                              {"LAB_RUN_ID": "r2-main"})
    lines = process.lines()
    assert next(lines) == "up"
    started = time.monotonic()
    assert transport.kill(0, "r2", "all") == 1
    assert process.wait() == -9 and time.monotonic() - started < 30


def test_pick_port_and_unreachable_host(tmp_path, fake_ssh):
    assert 1024 <= ssh_transport(tmp_path).pick_port() < 65536
    with pytest.raises(RunError, match="Connection refused"):
        ssh_transport(tmp_path, "unreachable").pick_port()
    with pytest.raises(RunError, match="lost n0"):
        ssh_transport(tmp_path, "unreachable").check_alive()


def test_run_with_a_bad_inventory_fails_before_touching_anything(tmp_path):
    result = CliRunner().invoke(cli, ["run", "exercise01", "--inventory", str(tmp_path / "missing.ini")])
    assert isinstance(result.exception, SpecError) and "cannot read inventory" in result.exception.message
    result = CliRunner().invoke(cli, ["run", "exercise01", "--inventory", "x.ini", "--driver", "local"])
    assert isinstance(result.exception, SpecError)
