"""The lab under trouble: Ctrl-C, a second lab, a crashed CLI, a lost engine, OOM, a partitioned node."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from lab import paths

from .conftest import lab, lab_json, labelled

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# Lists (pid, LAB_RUN_ID) of every process started by a lab run inside a node.
RUN_PROCESSES = (
    "import os\n"
    "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
    "    try:\n"
    "        env = open(f'/proc/{pid}/environ', 'rb').read().split(b'\\0')\n"
    "    except OSError:\n"
    "        continue\n"
    "    for item in env:\n"
    "        if item.startswith(b'LAB_RUN_ID='):\n"
    "            print(pid, item[11:].decode())\n"
)
SLEEPER = "import time; print('started', flush=True); time.sleep(600)"


def run_processes(client, name):
    """node index -> run ids of the lab-run processes alive in that node."""
    found = {}
    for container in labelled(client, name)[0]:
        code, output = container.exec_run(["/opt/lab-venv/bin/python", "-c", RUN_PROCESSES])
        assert code == 0, output
        found[int(container.labels["io.lab.node"])] = [line.split()[1] for line in output.decode().splitlines()]
    return found


def start_lab(*args, env=None):
    """`lab` in the background, with Ctrl-C armed even when this suite runs as a background job (where the
    shell starts everything with SIGINT ignored, and Python then keeps ignoring it)."""
    return subprocess.Popen([sys.executable, "-m", "lab.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, **(env or {})},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def wait_for(predicate, seconds=120, what="condition"):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def runs_of(kind):
    return [run for run in lab_json("runs") if run.get("exercise") == kind]


def test_ctrl_c_during_run_stops_every_process_in_every_container(client, two_nodes):
    before = len(runs_of("exercise03"))
    process = start_lab("run", "exercise03", "--name", two_nodes)
    wait_for(lambda: all(run_processes(client, two_nodes).values()), what="exercise03 running on both nodes")
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    assert run_processes(client, two_nodes) == {0: [], 1: []}
    records = runs_of("exercise03")
    assert len(records) == before + 1 and records[-1]["status"] == "interrupted"


# `lab up` whose Ctrl-C lands the instant its lab is whole (as the interruption trials once hit under load): the
# signal is sent while the result is being made, after the last step, before anything is printed.
CTRL_C_ONCE_WHOLE = (
    "import os, signal, sys\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "from lab.nodes import lifecycle\n"
    "from lab.cli import main\n"
    "made = lifecycle.UpResult\n"
    "def interrupted_result(*args, **kwargs):\n"
    "    os.kill(os.getpid(), signal.SIGINT)\n"
    "    return made(*args, **kwargs)\n"
    "lifecycle.UpResult = interrupted_result\n"
    "sys.argv = ['lab', *sys.argv[1:]]\n"
    "main()\n"
)


def test_ctrl_c_once_the_lab_is_whole_neither_removes_it_nor_says_it_stopped(client, fresh_name):
    result = subprocess.run([sys.executable, "-c", CTRL_C_ONCE_WHOLE, "up", "--nodes", "2", "--name", fresh_name],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"lab '{fresh_name}' up in" in result.stdout and "interrupted" not in result.stderr
    containers = labelled(client, fresh_name)[0]
    assert len(containers) == 2 and all(container.status == "running" for container in containers)


def test_two_labs_side_by_side_do_not_touch_each_other(client, two_nodes, fresh_name):
    lab("up", "--nodes", "2", "--name", fresh_name, check=True)
    ids_before = sorted(c.id for c in labelled(client, two_nodes)[0])
    runs = {name: start_lab("run", "exercise01", "--name", name, "--json", "--quiet") for name in (two_nodes, fresh_name)}
    for name, process in runs.items():
        stdout, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr
        record = json.loads(stdout)[0]
        assert record["lab"] == name and record["status"] == "passed"
    # Each lab's node1 resolves node0 to its own lab's node0.
    for name in runs:
        report = lab_json("status", "--name", name)[name]["nodes"]
        node1 = client.containers.get(f"lab-{name}-node1")
        code, output = node1.exec_run(["getent", "hosts", "node0"])
        assert code == 0 and output.decode().split()[0] == report[0]["ip"]
    lab("down", "--name", fresh_name, check=True)
    assert labelled(client, fresh_name) == ([], [], [])
    assert sorted(c.id for c in labelled(client, two_nodes)[0]) == ids_before
    assert all(n["state"] == "running" for n in lab_json("status", "--name", two_nodes)[two_nodes]["nodes"])


def test_crashed_cli_leaves_processes_that_down_removes(client, fresh_name):
    lab("up", "--nodes", "1", "--name", fresh_name, check=True)
    process = start_lab("exec", "--name", fresh_name, "--", "python", "-c", SLEEPER)
    wait_for(lambda: run_processes(client, fresh_name).get(0), what="the sleeper to start")
    process.kill()  # the CLI dies without any chance to clean up
    process.wait(30)
    assert run_processes(client, fresh_name)[0], "a crashed CLI leaves its processes behind"
    result = lab("down", "--name", fresh_name, check=True)
    assert "1 container(s), 1 network(s), 1 volume(s)" in result.stdout
    assert labelled(client, fresh_name) == ([], [], [])


class SocketProxy:
    """A unix socket that forwards to the real engine until close(): the engine 'stops' for its clients."""

    def __init__(self, path, target="/var/run/docker.sock"):
        self.path, self.target, self.sockets = path, target, []
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(path)
        self.listener.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(self.target)
            self.sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source, sink):
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.listener.close()
        for sock in self.sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            except OSError:
                pass


def test_engine_stopping_mid_run_is_one_clear_error(client, fresh_name, tmp_path):
    lab("up", "--nodes", "1", "--name", fresh_name, check=True)
    proxy = SocketProxy(str(tmp_path / "engine.sock"))
    process = start_lab("exec", "--name", fresh_name, "--", "python", "-c", SLEEPER,
                        env={"DOCKER_HOST": f"unix://{tmp_path / 'engine.sock'}"})
    wait_for(lambda: run_processes(client, fresh_name).get(0), what="the sleeper to start")
    proxy.close()
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 3, stderr
    assert "lost the Docker engine" in stderr and "Traceback" not in stderr
    assert runs_of("exec")[-1]["status"] == "error"


def test_oom_killed_node_is_reported(client, fresh_name):
    lab("up", "--nodes", "1", "--memory", "512m", "--name", fresh_name, check=True)
    hog = "data = b'x' * (2 << 30); print(len(data))"
    result = lab("exec", "--name", fresh_name, "--json", "--", "python", "-c", hog)
    assert result.returncode == 1, result.stderr
    record = json.loads(result.stdout)
    assert record["steps"][0]["oom_killed"] == [0]
    assert "OOM" in result.stderr + result.stdout
    assert lab_json("status", "--name", fresh_name)[fresh_name]["nodes"][0]["state"] == "running"


def test_partitioned_node_times_out_naming_missing_ranks_and_heals(client, fresh_name):
    lab("up", "--nodes", "2", "--name", fresh_name, check=True)
    lab("fault", "partition", "node1", "--name", fresh_name, check=True)
    assert "partitioned" in " ".join(lab_json("status", "--name", fresh_name)[fresh_name]["nodes"][1]["faults"])
    result = lab("run", "exercise01", "--name", fresh_name, "--timeout", "20", "--json")
    assert result.returncode == 1
    assert "timed out after 20 s" in result.stderr + result.stdout
    assert "ranks that never reported: 0, 1" in result.stderr + result.stdout
    record = json.loads(result.stdout)[0]
    assert record["status"] == "failed" and record["steps"][0]["timed_out"]
    assert (paths.runs_dir() / record["run_id"] / "run.json").is_file()
    assert run_processes(client, fresh_name) == {0: [], 1: []}
    lab("fault", "heal", "node1", "--name", fresh_name, check=True)
    healed = lab("run", "exercise01", "--name", fresh_name, "--json", "--quiet")
    assert healed.returncode == 0, healed.stderr
