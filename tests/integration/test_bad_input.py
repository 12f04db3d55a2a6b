"""Bad input against a running lab: one line naming the problem, a hint, a non-zero exit, and nothing lost.

The cases that need no engine are in tests/unit/test_cli_errors.py; these need a real lab to be wrong about.
"""

import hashlib
import json
import os
import subprocess
import time
import uuid

import pytest

from lab import paths

from ..unit.test_cli_errors import assert_one_line_error
from .conftest import lab, lab_json, labelled

# One worker for the module: test_corrupted_run_record adds a record to the session's runs and removes it, which
# another worker's `unharmed` would see vanish.
pytestmark = [pytest.mark.docker, pytest.mark.xdist_group("bad_input")]


def lab_state(client, name):
    """What must survive a bad command: the containers, their states, the key, and every run record."""
    key = paths.lab_dir(name) / "ssh" / "id_ed25519"
    return ([(c.id, c.status) for c in labelled(client, name)[0]],
            hashlib.sha256(key.read_bytes()).hexdigest(),
            sorted(p.name for p in paths.runs_dir().iterdir()) if paths.runs_dir().is_dir() else [])


@pytest.fixture
def unharmed(client, two_nodes):
    """The shared lab, checked after the test to be exactly as it was (new run records aside)."""
    containers, key, runs = lab_state(client, two_nodes)
    yield two_nodes
    after_containers, after_key, after_runs = lab_state(client, two_nodes)
    assert after_containers == containers and after_key == key
    assert set(runs) <= set(after_runs)


@pytest.mark.parametrize("args,code,needle", [
    (["run", "exercise01", "--name", "nosuchlab"], 5, "no lab named 'nosuchlab'"),
    (["exec", "--name", "LAB", "--node", "5", "--", "hostname"], 2, "has nodes 0..1"),
    (["exec", "--name", "LAB", "--", "echo", "{foo}"], 2, "unknown placeholder {foo}"),
    (["exec", "--name", "LAB", "--env", "NOEQUALS", "--", "true"], 2, "is not KEY=VALUE"),
    (["exec", "--name", "LAB"], 2, "no command given"),
    (["torchrun", "--name", "LAB", "missing_script.py"], 2, "script 'missing_script.py' not found"),
    (["fault", "kill", "node7", "--name", "LAB"], 2, "no node 'node7'"),
    (["fault", "delay", "node1", "--ms", "10", "--name", "LAB"], 5, "NET_ADMIN"),
    (["up", "--nodes", "2", "--cpus", "1", "--name", "LAB"], 5, "different spec"),
    (["up", "--nodes", "1", "--memory", "100t", "--name", "toobig"], 2, "memory"),
    (["show", "no-such-run"], 2, "run"),
])
def test_bad_input_against_a_running_lab(unharmed, args, code, needle):
    assert_one_line_error(lab(*[unharmed if arg == "LAB" else arg for arg in args]), code, needle)


def test_corrupted_run_record(unharmed):
    run_dir = paths.runs_dir() / f"20000101-000000-000-{uuid.uuid4().hex[:6]}"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text("{ not json")
    try:
        assert_one_line_error(lab("show", run_dir.name), 5, "is corrupted")
        assert (run_dir / "run.json").read_text() == "{ not json"
        listed = [run for run in lab_json("runs") if run["run_id"] == run_dir.name]
        assert listed and listed[0]["status"] == "unreadable"
    finally:
        (run_dir / "run.json").unlink()
        run_dir.rmdir()


def test_corrupted_fault_state(unharmed):
    state = paths.lab_dir(unharmed) / "faults.json"
    state.write_text("[broken")
    try:
        assert_one_line_error(lab("status", "--name", unharmed), 5, "faults.json is corrupted")
        assert state.read_text() == "[broken"
    finally:
        state.unlink()
    assert lab("status", "--name", unharmed).returncode == 0


def test_corrupted_ssh_key(unharmed):
    key = paths.lab_dir(unharmed) / "ssh" / "id_ed25519"
    original = key.read_bytes()
    key.write_bytes(b"-----BEGIN OPENSSH PRIVATE KEY-----\ngarbage\n-----END OPENSSH PRIVATE KEY-----\n")
    try:
        assert_one_line_error(lab("provision", "--name", unharmed), 5, "SSH key", "--recreate")
    finally:
        key.write_bytes(original)


def test_port_clash_on_master(client, unharmed):
    """A port something holds on node0 (seen from this machine in the node's /proc tables, or from inside it) is
    refused when asked for, and passed over when the lab chooses."""
    node0 = client.containers.get(f"lab-{unharmed}-node0")
    # SO_REUSEADDR: earlier runs on this lab leave 29500 in TIME_WAIT, which a plain bind refuses
    holder = ("import socket, time\nfor port in (29555, 29500):\n    s = socket.socket(); "
              "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('', port)); "
              "s.listen(); globals()[f's{port}'] = s\ntime.sleep(120)")
    node0.exec_run(["python", "-c", holder], detach=True)
    try:
        for _ in range(50):
            tables = node0.exec_run(["cat", "/proc/net/tcp"]).output
            if b":7373" in tables and b":733C" in tables:  # 29555 = 0x7373 and 29500 = 0x733C, both listening
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"the port holder never listened on node0: {tables.decode()}")
        assert_one_line_error(lab("run", "exercise01", "--name", unharmed, "--master-port", "29555"), 7,
                              "port 29555 is already in use on node0", "--master-port")
        chosen = lab("exec", "--name", unharmed, "--", "sh", "-c", "echo CHOSEN=$MASTER_PORT")
        ports = {line.split("| CHOSEN=")[1] for line in chosen.stdout.splitlines() if "| CHOSEN=" in line}
        assert len(ports) == 1 and ports != {"29500"} and ports != {"29555"}, chosen.stdout
    finally:
        node0.exec_run(["pkill", "-f", "s.bind"])


def test_no_disk_left_for_lab_files(client, tmp_path):
    """A full disk under LAB_HOME: one line, exit 8, and no container, network or volume created."""
    home = tmp_path / "full"
    home.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(home)], capture_output=True).returncode:
        pytest.skip("needs root to mount a small tmpfs")
    try:
        filler = os.open(home / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(filler, b"\0" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(filler)
        name = f"full{uuid.uuid4().hex[:6]}"
        result = lab("up", "--nodes", "1", "--name", name, env={"LAB_HOME": str(home)})
        assert_one_line_error(result, 8, "No space left on device", "free some disk space")
        assert labelled(client, name) == ([], [], [])
    finally:
        subprocess.run(["umount", str(home)], capture_output=True)


def test_json_of_a_failed_command_is_not_printed_half(unharmed):
    result = lab("run", "exercise99", "--name", unharmed, "--json")
    assert result.stdout == ""
    assert_one_line_error(result, 2, "no exercise named 'exercise99'")
    with pytest.raises(json.JSONDecodeError):
        json.loads(result.stdout)
