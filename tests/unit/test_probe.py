"""playbooks/files/probe.py: the node probe provisioning runs on every node (cheap) and `lab doctor` runs with --deep."""

import importlib.util
import json
import socket
import subprocess
import sys

import pytest

from lab import paths

PROBE = paths.resource("playbooks") / "files" / "probe.py"


@pytest.fixture
def probe():
    spec = importlib.util.spec_from_file_location("lab_probe", PROBE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_torch(root, cuda=None, cuda_library=False):
    """A torch package whose import fails loudly: the cheap probe must read its files only."""
    package = root / "torch"
    (package / "lib").mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('the cheap probe imported torch')\n")
    (package / "version.py").write_text(
        "from typing import Optional\n__version__ = '9.9.9+fake'\ndebug = False\n"
        f"cuda: Optional[str] = {cuda!r}\ngit_version = 'abc'\n")
    if cuda_library:
        (package / "lib" / "libtorch_cuda.so").write_text("")
    return root


def run_probe(*args, pythonpath=None, flags=()):
    env = {"PATH": "/usr/bin:/bin", **({"PYTHONPATH": str(pythonpath)} if pythonpath else {})}
    result = subprocess.run([sys.executable, *flags, "-c", PROBE.read_text(), *args], capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_cheap_probe_reads_torch_without_importing_it(tmp_path):
    report = run_probe("localhost", pythonpath=fake_torch(tmp_path, cuda="12.4", cuda_library=True))
    assert report["torch"] == "9.9.9+fake" and report["cuda_build"] == "12.4" and report["deep"] is False
    assert report["backends"] == ["gloo", "nccl"]
    assert report["peers"]["localhost"] and report["unresolved"] == []


def test_cpu_build_offers_gloo_only_and_no_gpus(tmp_path):
    report = run_probe(pythonpath=fake_torch(tmp_path))
    assert report["backends"] == ["gloo"] and report["gpus"] == [] and report["cuda"] is False


def test_missing_torch_is_reported_not_raised(tmp_path):
    for deep in ((), ("--deep",)):
        report = run_probe(*deep, flags=("-S",))  # -S: no site-packages, so no torch
        assert report["torch"] is None and "torch" in report["error"], deep


def test_deep_probe_agrees_with_the_cheap_one_on_this_torch():
    pytest.importorskip("torch")
    cheap, deep = run_probe(), run_probe("--deep")
    assert deep["deep"] is True
    for key in ("torch", "cuda_build", "backends", "gpus", "cuda", "nccl"):
        assert cheap[key] == deep[key], key


def test_every_peer_is_resolved_at_once_and_unresolved_ones_listed(probe, monkeypatch):
    table = {"node0": "172.20.0.2", "node1": "172.20.0.3"}
    asked = []

    def getaddrinfo(name, port, family=0, type=0, *rest):
        asked.append(name)
        if name not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET6, type, 6, "", ("fd00::1", 0, 0, 0)), (socket.AF_INET, type, 6, "", (table[name], 0))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    peers = probe.resolve_all(["node0", "node1", "node7"])
    assert peers == {"node0": "172.20.0.2", "node1": "172.20.0.3", "node7": None}  # IPv4 preferred
    assert sorted(asked) == ["node0", "node1", "node7"]


def test_gpus_are_those_whose_device_node_this_node_has(probe, tmp_path):
    for minor, model in ((0, "NVIDIA H100 80GB HBM3"), (1, "NVIDIA A100-SXM4-40GB")):
        folder = tmp_path / "proc" / "driver" / "nvidia" / "gpus" / f"0000:0{minor}:00.0"
        folder.mkdir(parents=True)
        (folder / "information").write_text(f"Model: \t {model}\nDevice Minor: \t {minor}\n")
    (tmp_path / "dev").mkdir()
    assert probe.node_gpus(str(tmp_path)) == []
    (tmp_path / "dev" / "nvidia1").write_text("")
    assert probe.node_gpus(str(tmp_path)) == ["NVIDIA A100-SXM4-40GB"]


def test_device_nodes_alone_count_when_the_driver_folder_is_hidden(probe, tmp_path):
    (tmp_path / "dev").mkdir()
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        (tmp_path / "dev" / name).write_text("")
    assert probe.node_gpus(str(tmp_path)) == ["NVIDIA GPU", "NVIDIA GPU"]
