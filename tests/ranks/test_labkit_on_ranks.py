"""labkit, the helper module of the exercise programs, on every rank of a real 2-node lab: lab's pytest plugin runs
these bodies there (torch.distributed initialised, gloo), so what labkit reads of torchrun's environment is checked
where the programs run, against where each rank really is.

Here, not under tests/integration: the ranks import this module and its conftest chain on the nodes, which have torch
but not the Docker SDK that the integration tests' conftest imports.
"""

import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "exercises"))  # the workspace's copy, as /lab/exercises

import labkit  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.lab(nodes=2, nproc_per_node=2, timeout=240)]


def test_labkit_places_each_rank_on_its_node(lab_rank):
    assert labkit.torchrun_env() == {"rank": lab_rank.rank, "local_rank": lab_rank.local_rank, "world_size": 4,
                                     "group_rank": lab_rank.node_rank, "local_world_size": 2}
    assert (labkit.node_rank(), labkit.nnodes(), labkit.nproc_per_node()) == (lab_rank.node_rank, 2, 2)
    places = [None] * dist.get_world_size()
    dist.all_gather_object(places, (lab_rank.rank, lab_rank.hostname))
    assert places == [(0, "node0"), (1, "node0"), (2, "node1"), (3, "node1")]


def test_labkit_global_mean_and_parameters_hash_agree_across_nodes(lab_rank):
    assert labkit.pick_backend(lab_rank.local_rank) == dist.get_backend() == "gloo"
    assert labkit.global_mean(lab_rank.rank, torch.device("cpu")) == 1.5  # (0 + 1 + 2 + 3) / 4 on every rank
    torch.manual_seed(lab_rank.rank)  # each rank its own weights, until DDP broadcasts rank 0's
    model = labkit.wrap_ddp(torch.nn.Linear(4, 2), torch.device("cpu"))
    hashes = [None] * dist.get_world_size()
    dist.all_gather_object(hashes, labkit.parameters_hash(model.module))
    assert len(set(hashes)) == 1, hashes
