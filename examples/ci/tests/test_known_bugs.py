"""A test that hangs and two bugs that pass on one host and fail across nodes: each fails on the lab with the rank,
its traceback and the cause (the hang: every rank's stack, and the session goes on). Marked known_bug: the suite a
CI job runs is `pytest -m "not known_bug"`."""

import pytest
import torch
import torch.distributed as dist

from ciexample import naive
from ciexample.distributed import gather_objects

pytestmark = [pytest.mark.known_bug, pytest.mark.lab(nodes=2, nproc_per_node=1)]


@pytest.mark.lab(nodes=2, nproc_per_node=1, timeout=60)
def test_swap_with_the_other_rank(lab_rank):
    mine, theirs = torch.full((2,), float(lab_rank.rank)), torch.empty(2)
    other = 1 - lab_rank.rank
    dist.recv(theirs, src=other)  # bug: both ranks receive first, so neither ever sends
    dist.send(mine, dst=other)
    assert theirs.tolist() == [float(other)] * 2


def test_resume_from_the_checkpoint_rank_0_saved(lab_rank):
    state = naive.save_and_resume({"step": 3, "weights": torch.ones(2)})
    assert state["step"] == 3


def test_shards_cover_the_data_once(lab_rank):
    shards = gather_objects(naive.my_shard(list(range(8))))
    assert sorted(item for part in shards for item in part) == list(range(8))
