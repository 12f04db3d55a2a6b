"""The user's own code on a real 2-node lab: `lab exec`, `lab torchrun`, and `lab export compose` brought back up."""

import json
import re
import uuid
from pathlib import Path

import pytest
import yaml

from lab import paths

from .conftest import lab, lab_json

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# Written for two terminals: `python two_terminals.py --rank 0 --world-size 2` here, `--rank 1` there.
TWO_TERMINALS = """
import argparse, os
import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--rank", type=int, required=True)
parser.add_argument("--world-size", type=int, required=True)
args = parser.parse_args()
dist.init_process_group("gloo", init_method=f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
                        rank=args.rank, world_size=args.world_size)
value = torch.tensor([float(args.rank + 1)])
dist.all_reduce(value)
print(f"rank {args.rank} of {args.world_size}: sum = {value.item():g}", flush=True)
dist.destroy_process_group()
"""

# An unmodified torchrun script: rank and world size come from torchrun's environment only.
TORCHRUN_SCRIPT = """
import os, sys
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
value = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(value)
print(f"RESULT rank={dist.get_rank()} world={dist.get_world_size()} sum={value.item():g} args={' '.join(sys.argv[1:])}",
      flush=True)
dist.destroy_process_group()
"""


def node_logs(record: dict) -> dict[int, str]:
    logs = Path(record["path"]) / "logs"
    return {int(path.name[4]): path.read_text() for path in sorted(logs.glob("node*-main.log"))}


def lab_json_before(command: list[str], rest: list[str]) -> dict:
    """`lab COMMAND --json REST`: --json must come before the user's command, which gets everything after it."""
    return json.loads(lab(*command, "--json", *rest, timeout=300, check=True).stdout)


def recorded(run_id: str) -> dict:
    return next(run for run in lab_json("runs") if run["run_id"] == run_id)


@pytest.mark.parametrize("visible_by", ["copy", "shared-folder"])
def test_two_terminal_script_runs_on_both_nodes_with_one_line(two_nodes, tmp_path, visible_by):
    if visible_by == "copy":  # --copy puts it in the run's working folder, which is the command's cwd
        script = tmp_path / "two_terminals.py"
        script.write_text(TWO_TERMINALS)
        options, path_on_nodes = ["--copy", str(script)], "two_terminals.py"
    else:  # the lab's shared folder on this host is /lab/shared on every node
        shared = paths.lab_dir(two_nodes) / "shared"
        (shared / "two_terminals.py").write_text(TWO_TERMINALS)
        options, path_on_nodes = [], "/lab/shared/two_terminals.py"
    record = lab_json_before(["exec", "--name", two_nodes, *options],
                             ["--", "python", path_on_nodes, "--rank", "{rank}", "--world-size", "{world_size}"])
    assert record["status"] == "passed"
    logs = node_logs(record)
    assert set(logs) == {0, 1}
    for rank, text in logs.items():
        assert f"rank {rank} of 2: sum = 3" in text, text
    assert recorded(record["run_id"])["status"] == "passed"


@pytest.mark.parametrize("rdzv", ["static", "c10d"])
def test_torchrun_runs_an_unmodified_script(two_nodes, tmp_path, rdzv):
    script = tmp_path / "project" / "train.py"
    script.parent.mkdir()
    script.write_text(TORCHRUN_SCRIPT)
    record = lab_json_before(["torchrun", "--name", two_nodes, "--rdzv", rdzv, "--nproc-per-node", "2"],
                             [str(script), "--epochs", "1"])
    assert record["status"] == "passed"
    results = re.findall(r"RESULT rank=(\d) world=(\d) sum=(\d+) args=(--epochs 1)", "".join(node_logs(record).values()))
    assert sorted(int(rank) for rank, *_ in results) == [0, 1, 2, 3]
    assert {(world, total) for _, world, total, _ in results} == {("4", "10")}
    assert recorded(record["run_id"])["exercise"] == "torchrun"


def relabel(labels: dict, project: str) -> dict:
    """The exported labels, moved to another lab so `lab` never mistakes the copy for the original."""
    return {**labels, "com.docker.compose.project": f"lab-{project}", "io.lab.lab": project}


def test_exported_compose_file_describes_the_lab_and_starts(two_nodes, client):
    result = lab("export", "compose", "--name", two_nodes, check=True)
    document = yaml.safe_load(result.stdout)
    assert document["name"] == f"lab-{two_nodes}" and set(document["services"]) == {"node0", "node1"}
    assert document["networks"]["lab"]["name"] == f"lab-{two_nodes}-net"
    assert document["volumes"]["shared"]["name"] == f"lab-{two_nodes}-shared"
    for index, (hostname, service) in enumerate(sorted(document["services"].items())):
        assert service["hostname"] == hostname and service["container_name"] == f"lab-{two_nodes}-{hostname}"
        assert service["labels"]["io.lab.lab"] == two_nodes and service["labels"]["io.lab.node"] == str(index)
        assert service["labels"]["com.docker.compose.project"] == f"lab-{two_nodes}"
        assert "shared:/lab/shared" in service["volumes"]
        assert any(volume.endswith(":/lab/exercises:ro") for volume in service["volumes"])
        assert service["networks"]["lab"]["aliases"] == [hostname]
        assert service["image"] == client.containers.get(service["container_name"]).attrs["Config"]["Image"]

    # Bring the file up with the Docker SDK under another project name, the way compose would.
    copy = f"h4copy{uuid.uuid4().hex[:4]}"
    network_spec, volume_spec = document["networks"]["lab"], document["volumes"]["shared"]
    network = client.networks.create(f"lab-{copy}-net", driver=network_spec["driver"], options=network_spec["driver_opts"],
                                     labels=relabel(network_spec["labels"], copy))
    volume = client.volumes.create(f"lab-{copy}-shared", driver=volume_spec["driver"],
                                   driver_opts=volume_spec["driver_opts"], labels=relabel(volume_spec["labels"], copy))
    containers = {}
    try:
        for hostname, service in document["services"].items():
            binds = {}
            for entry in service["volumes"]:
                source, target, *mode = entry.split(":")
                binds[volume.name if source == "shared" else source] = {"bind": target, "mode": mode[0] if mode else "rw"}
            container = client.containers.create(
                service["image"], name=f"lab-{copy}-{hostname}", hostname=service["hostname"], init=service["init"],
                shm_size=service["shm_size"], labels=relabel(service["labels"], copy), environment=service["environment"],
                volumes=binds, ports={"22/tcp": ("127.0.0.1", None)})
            containers[hostname] = container
            network.connect(container, aliases=service["networks"]["lab"]["aliases"])
            container.start()
        node0_ip = client.containers.get(containers["node0"].id).attrs["NetworkSettings"]["Networks"][network.name]["IPAddress"]
        code, output = containers["node1"].exec_run(["getent", "hosts", "node0"])
        assert code == 0 and output.decode().split()[0] == node0_ip
        code, output = containers["node1"].exec_run(["ls", "/lab/exercises"])
        assert code == 0 and b"exercise01_join" in output
    finally:
        for container in containers.values():
            container.remove(force=True)
        network.remove()
        volume.remove(force=True)
    assert not client.containers.list(all=True, filters={"label": f"io.lab.lab={copy}"})
