"""Asking the nodes after a failed run (lab/jobs/probes.py): the probe script run for real, as processes on this host
(LocalTransport), in the job's working directory and environment; a node that does not answer in time."""

import os
import sys
import time
from pathlib import Path

from lab.jobs.adhoc import with_node_python
from lab.jobs.probes import ask_nodes, shared_folders
from lab.jobs.transports import LocalProcess, LocalTransport


def test_every_node_answers_about_the_paths_commands_and_variables_the_logs_name(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "shards").mkdir()
    (tmp_path / "data" / "vocab.json").write_text("{}")
    (tmp_path / "train.py").write_text('store = dist.FileStore("/tmp/no-such-store-xyz", 2)\n')
    logs = {0: "FileNotFoundError: [Errno 2] No such file or directory: 'data/vocab.json'\n"
               "FileNotFoundError: [Errno 2] No such file or directory: 'data/shard/0.pt'",
            1: "KeyError: 'LAB_PROBE_SET'\nsh: 1: no-such-tool-xyz: not found"}
    commands = {index: (["python", "train.py"], {"LAB_PROBE_SET": "1"} if index == 0 else {}) for index in (0, 1)}
    transport = LocalTransport(tmp_path / "shared", tmp_path)
    probes = ask_nodes(transport, commands, logs, str(tmp_path), None)
    assert probes.shared == ["/"] and probes.launcher_env == [] and probes.seconds < 10
    node0, node1 = probes.nodes
    assert not node0.error and node0.python == sys.executable and "lo" in node0.interfaces
    vocab = node0.paths["data/vocab.json"]
    assert (vocab.kind, vocab.size, vocab.absolute) == ("file", 2, str(tmp_path / "data" / "vocab.json"))
    shard = node0.paths["data/shard/0.pt"]
    assert (shard.kind, shard.parent, shard.existing) == (None, False, str(tmp_path / "data"))
    assert shard.close == str(tmp_path / "data" / "shards")
    assert node0.commands["no-such-tool-xyz"] is None and node0.commands["python3"]
    assert (node0.env["LAB_PROBE_SET"], node1.env["LAB_PROBE_SET"]) == (True, False)  # the job's env, per node
    assert node0.rendezvous == [{"path": "/tmp/no-such-store-xyz", "where": "train.py:1",
                                 "text": 'store = dist.FileStore("/tmp/no-such-store-xyz", 2)'}]
    assert node0.paths["/tmp/no-such-store-xyz"].kind is None


class SilentTransport(LocalTransport):
    """Node 1's probe never answers (a paused node): its process sleeps past the timeout."""

    def start(self, index, argv, env, cwd=None):
        if index == 1:
            return LocalProcess([sys.executable, "-c", "import time; time.sleep(6)"], {}, self.host_shared_dir)
        return super().start(index, argv, env, cwd)


def test_a_node_that_does_not_answer_in_time_is_recorded_and_the_others_still_are(tmp_path):
    started = time.monotonic()
    probes = ask_nodes(SilentTransport(tmp_path, tmp_path), {0: (["true"], {}), 1: (["true"], {})}, {}, None, None,
                       timeout=2)
    assert time.monotonic() - started < 5
    assert not probes.nodes[0].error and probes.nodes[1].error == "did not answer within 2 s"
    assert [facts.node for facts in probes.answered()] == [0]


def test_the_folders_the_nodes_share():
    class Lab:
        shares_folder, shared_dir, exercises_dir = True, "/lab/shared", "/lab/exercises"

    class Hosts:
        shares_folder = False

    assert shared_folders(Lab(), "/home/me/proj") == ["/lab/shared", "/home/me/proj", "/lab/exercises"]
    assert shared_folders(Hosts(), "/home/me/proj") == []


def test_python_as_the_command_runs_the_nodes_interpreter():
    assert with_node_python(["python", "train.py"], "/usr/bin/python3") == ["/usr/bin/python3", "train.py"]
    assert with_node_python(["python3", "-c", "1"], "/opt/conda/bin/python") == ["/opt/conda/bin/python", "-c", "1"]
    assert with_node_python(["python3.11", "x.py"], "/usr/bin/python3") == ["python3.11", "x.py"]
    assert with_node_python(["sh", "-c", "python x.py"], "/usr/bin/python3") == ["sh", "-c", "python x.py"]


def test_every_node_says_how_full_its_dev_shm_is_and_what_fills_it(tmp_path):
    segment = Path("/dev/shm") / f"lab-probe-test-{os.getpid()}"
    with open(segment, "wb") as handle:
        os.posix_fallocate(handle.fileno(), 0, 8 << 20)
    try:
        probes = ask_nodes(LocalTransport(tmp_path / "shared", tmp_path), {0: (["python", "x.py"], {})}, {0: ""},
                           str(tmp_path), None)
        shm = probes.nodes[0].shm
        biggest = sorted((entry.stat().st_blocks * 512 for entry in os.scandir("/dev/shm") if entry.is_file()),
                         reverse=True)[:5]
        assert shm["size"] > 0 and 0 <= shm["free"] <= shm["size"]
        assert [found["size"] for found in shm["largest"]] == biggest
        if 8 << 20 >= biggest[-1]:
            [ours] = [found for found in shm["largest"] if found["path"] == str(segment)]
            assert ours["size"] == 8 << 20 and abs(ours["mtime"] - time.time()) < 60
    finally:
        segment.unlink()
