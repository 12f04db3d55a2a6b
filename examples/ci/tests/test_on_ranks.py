"""Test bodies that run on every rank across the nodes: `@pytest.mark.lab` (lab's pytest plugin)."""

import pytest
import torch
import torch.distributed as dist

from ciexample import checkpoint
from ciexample.distributed import all_mean, gather_objects, shard

pytestmark = pytest.mark.lab(nodes=2, nproc_per_node=1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_all_mean(lab_rank, dtype):
    value = all_mean(torch.full((3,), float(lab_rank.rank + 1), dtype=dtype))
    assert value.tolist() == [(lab_rank.world_size + 1) / 2] * 3


def test_each_rank_on_its_own_node(lab_rank):
    assert lab_rank.world_size == 2
    assert lab_rank.hostname == f"node{lab_rank.node_rank}"
    assert sorted(gather_objects(lab_rank.hostname)) == ["node0", "node1"]


def test_shards_cover_the_data_once(lab_rank):
    shards = gather_objects(shard(list(range(10))))
    assert sorted(item for part in shards for item in part) == list(range(10))


def test_checkpoint_written_by_rank_0(lab_rank, tmp_path):
    checkpoint.save({"step": 7, "weights": torch.arange(4.0)}, tmp_path / "ckpt.pt")
    state = checkpoint.load(tmp_path / "ckpt.pt")
    assert state["step"] == 7 and state["weights"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert (tmp_path / "ckpt.pt").exists() == (lab_rank.rank == 0)  # tmp_path is each node's own


@pytest.mark.lab(nodes=2, nproc_per_node=2)
def test_four_ranks(lab_rank):
    assert dist.get_world_size() == 4
    assert lab_rank.rank == lab_rank.node_rank * 2 + lab_rank.local_rank
