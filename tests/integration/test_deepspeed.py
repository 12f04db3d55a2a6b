"""DeepSpeed's own launcher across a lab: `deepspeed --hostfile /etc/lab/hostfile` on node0 starts every rank on
every node through pdsh over the lab's node-to-node SSH, and a tiny model trains on CPU with gloo.

The node image has no pdsh (its Perl alone is ~25 MB more for everyone): the test makes the image a DeepSpeed team
would bring, the node image plus pdsh from Debian packages this host's apt downloads, and runs it with
`lab up --image`; DeepSpeed itself is published as source only, so `--pip deepspeed==...` has its wheel built here.
A few minutes of downloads and builds: `long`, run by `make test-long`.
"""

import re
import subprocess

import pytest

from .conftest import lab

pytestmark = [pytest.mark.docker, pytest.mark.long]

DEEPSPEED = "deepspeed==0.19.8"
TRAIN = '''import os, deepspeed, torch, torch.distributed as dist
deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False  # no compiler on the nodes: plain gloo
deepspeed.init_distributed(dist_backend="gloo")
model = torch.nn.Linear(8, 1)
engine, _, _, _ = deepspeed.initialize(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
    config={"train_batch_size": 2 * dist.get_world_size(), "train_micro_batch_size_per_gpu": 2})
torch.manual_seed(dist.get_rank())
for step in range(5):
    loss = engine(torch.randn(2, 8)).pow(2).mean()
    engine.backward(loss)
    engine.step()
gathered = [torch.zeros_like(model.weight) for _ in range(dist.get_world_size())]
dist.all_gather(gathered, model.weight.detach())
print("DS", dist.get_rank(), dist.get_world_size(), os.uname().nodename, all(torch.equal(g, gathered[0]) for g in gathered))
'''


@pytest.fixture(scope="module")
def pdsh_image(client, tmp_path_factory):
    """The node image plus pdsh and what it needs, from .debs this host downloads: built offline."""
    node_image = next(image for image in client.images.list(name="lab-node") if image.tags)
    folder = tmp_path_factory.mktemp("pdsh-image")
    (folder / "status").write_bytes(client.containers.run(node_image.id, ["cat", "/var/lib/dpkg/status"], remove=True))
    simulation = subprocess.run(["apt-get", "-s", "-o", f"Dir::State::status={folder / 'status'}", "install",
                                 "--no-install-recommends", "pdsh"], capture_output=True, text=True, check=True)
    (folder / "debs").mkdir()
    # every package apt would install or upgrade (pdsh's perl needs the perl-base of its own release)
    wanted = [f"{name}={version}" for name, version in
              re.findall(r"^Inst (\S+) (?:\[\S+\] )?\((\S+)", simulation.stdout, re.MULTILINE)]
    subprocess.run(["apt-get", "download", *wanted], cwd=folder / "debs", check=True, capture_output=True)
    (folder / "Dockerfile").write_text(f"FROM {node_image.tags[0]}\nCOPY debs /tmp/debs\n"
                                       "RUN dpkg -i /tmp/debs/*.deb && rm -rf /tmp/debs && pdsh -V\n")
    image, _ = client.images.build(path=str(folder), tag="lab-test-deepspeed:pdsh", network_mode="none", rm=True,
                                     forcerm=True)
    yield image.tags[0]
    remove_with_descendants(client, image.id)


def remove_with_descendants(client, image_id: str) -> None:
    """The image and what the lab built on it (the lab's derived image, the packages layer on that), leaves first."""
    for child in client.images.list(all=True):
        if child.attrs.get("Parent") == image_id:
            remove_with_descendants(client, child.id)
    client.images.remove(image_id, force=True)


def test_deepspeeds_launcher_starts_every_rank_on_every_node_and_trains(pdsh_image, fresh_name, tmp_path):
    up = lab("up", "--nodes", "2", "--name", fresh_name, "--image", pdsh_image, "--pip", DEEPSPEED, timeout=900)
    assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-2000:]
    (tmp_path / "train_ds.py").write_text(TRAIN)
    run = lab("exec", "--name", fresh_name, "--node", "0", "--timeout", "300", "--copy", str(tmp_path / "train_ds.py"),
              "--", "deepspeed", "--hostfile", "/etc/lab/hostfile", "train_ds.py", timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    said = sorted(line.split("DS ", 1)[1].split() for line in run.stdout.splitlines() if ": DS " in line)
    assert said == [["0", "4", "node0", "True"], ["1", "4", "node0", "True"], ["2", "4", "node1", "True"],
                    ["3", "4", "node1", "True"]], run.stdout[-3000:]
    assert "pdsh -S -f 1024 -w node0,node1" in run.stdout  # DeepSpeed's own multi-node launch, not the lab's
