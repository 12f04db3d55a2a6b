"""The checkers of exercises 01-03 on hand-built outcomes: what the programs report passes, each kind of wrong
result fails the check that is about it."""

import math

import pytest

from lab.jobs.exercises import find
from tests.unit.checker_helpers import assert_fails, failed, outcome


# --- exercise 01: one process per node joins by env:// ---------------------------------------------------------

def join_results(n: int) -> dict[int, dict]:
    """What join.py writes on n nodes: rank = node rank, node0 is MASTER_ADDR, all_reduce of rank + 1."""
    return {rank: {"rank": rank, "node_rank": rank, "hostname": f"node{rank}", "world_size": n,
                   "all_reduce_sum": sum(r + 1 for r in range(n)), "master_addr": "node0", "master_port": 29500,
                   "master_addr_is_this_host": rank == 0} for rank in range(n)}


@pytest.mark.parametrize("n", [2, 3])
def test_join_correct_outcome_passes(n):
    assert failed(find("01").load_checker(), outcome(join_results(n), n, 1)) == []


def test_join_ignores_nproc_per_node():
    """One process per node whatever --nproc-per-node says (it may come from `lab up --nproc-per-node`)."""
    assert failed(find("01").load_checker(), outcome(join_results(2), 2, 4)) == []


def _drop_rank1(results):
    del results[1]


def _same_node_rank(results):
    results[1]["node_rank"] = 0


def _wrong_world(results):
    results[0]["world_size"] = 1


def _shared_host(results):
    results[1]["hostname"] = "node0"


def _wrong_sum(results):
    results[1]["all_reduce_sum"] = 2


def _other_master(results):
    results[1]["master_addr"] = "node1"


def _other_port(results):
    results[1]["master_port"] = 29501


def _master_elsewhere(results):
    results[0]["master_addr_is_this_host"] = False


@pytest.mark.parametrize("mutate, fragment", [
    (_drop_rank1, "ranks reported"),
    (_same_node_rank, "joined as rank NODE_RANK"),
    (_wrong_world, "world size is 2"),
    (_shared_host, "distinct hosts"),
    (_wrong_sum, "all_reduce sum"),
    (_other_master, "same MASTER_ADDR"),
    (_other_port, "same MASTER_PORT"),
    (_master_elsewhere, "rank 0's host"),
])
def test_join_wrong_outcome_fails(mutate, fragment):
    results = join_results(2)
    mutate(results)
    assert_fails(find("01").load_checker(), outcome(results, 2, 1), fragment)


# --- exercise 02: mp.spawn, K workers per node ------------------------------------------------------------------

def spawn_results(n: int, k: int) -> dict[int, dict]:
    w = n * k
    results = {}
    for node in range(n):
        for local in range(k):
            rank = node * k + local
            results[rank] = {"rank": rank, "node_rank": node, "local_rank": local, "hostname": f"node{node}",
                             "world_size": w, "gathered": [[q, q // k] for q in range(w)],
                             "all_reduce_sum": sum(range(w))}
    return results


@pytest.mark.parametrize("n, k", [(2, 2), (3, 2), (2, 1)])
def test_spawn_correct_outcome_passes(n, k):
    assert failed(find("02").load_checker(), outcome(spawn_results(n, k), n, k)) == []


def _drop_rank3(results):
    del results[3]


def _duplicate_local_rank(results):
    results[1]["local_rank"] = 0


def _interleaved_ranks(results):
    """Ranks handed out round-robin over nodes instead of contiguously per node."""
    for rank, result in results.items():
        result["node_rank"], result["local_rank"] = rank % 2, rank // 2
        result["hostname"] = f"node{rank % 2}"


def _node_split_over_hosts(results):
    results[1]["hostname"] = "node1"


def _one_host(results):
    for result in results.values():
        result["hostname"] = "node0"


def _gather_out_of_order(results):
    results[2]["gathered"] = list(reversed(results[2]["gathered"]))


def _sum_of_w(results):
    results[0]["all_reduce_sum"] = 4 * 5 // 2


@pytest.mark.parametrize("mutate, fragment", [
    (_drop_rank3, "ranks reported"),
    (_duplicate_local_rank, "local ranks 0..1"),
    (_interleaved_ranks, "rank = node_rank * 2 + local_rank"),
    (_node_split_over_hosts, "share one hostname"),
    (_one_host, "distinct hosts"),
    (_gather_out_of_order, "all_gather"),
    (_sum_of_w, "W(W-1)/2"),
])
def test_spawn_wrong_outcome_fails(mutate, fragment):
    results = spawn_results(2, 2)
    mutate(results)
    assert_fails(find("02").load_checker(), outcome(results, 2, 2), fragment)


# --- exercise 03: torchrun + DDP --------------------------------------------------------------------------------

def torchrun_results(n: int, k: int) -> dict[int, dict]:
    w = n * k
    return {node * k + local: {"rank": node * k + local, "local_rank": local, "world_size": w, "group_rank": node,
                               "local_world_size": k, "pg_world_size": w, "node_rank": node, "hostname": f"node{node}",
                               "dataset_size": 1024, "samples": math.ceil(1024 / w), "params_hash": "9f2c",
                               "first_loss": 1.25, "final_loss": 0.08}
            for node in range(n) for local in range(k)}


@pytest.mark.parametrize("n, k", [(2, 2), (3, 1)])
def test_torchrun_correct_outcome_passes(n, k):
    assert failed(find("03").load_checker(), outcome(torchrun_results(n, k), n, k)) == []


def _unequal_hashes(results):
    results[3]["params_hash"] = "0000"


def _loss_not_decreasing(results):
    results[0]["final_loss"] = results[0]["first_loss"]


def _loss_missing(results):
    results[0]["final_loss"] = float("nan")


def _group_rank_inconsistent(results):
    results[2]["group_rank"] = 0


def _wrong_world_size(results):
    results[1]["world_size"] = 2


def _small_process_group(results):
    results[1]["pg_world_size"] = 2


def _whole_dataset_on_one_rank(results):
    results[0]["samples"] = 1024


@pytest.mark.parametrize("mutate, fragment", [
    (_drop_rank3, "ranks reported"),
    (_unequal_hashes, "parameters identical"),
    (_loss_not_decreasing, "loss at the end"),
    (_loss_missing, "loss at the end"),
    (_group_rank_inconsistent, "RANK = GROUP_RANK"),
    (_one_host, "distinct hosts"),
    (_node_split_over_hosts, "share one hostname"),
    (_wrong_world_size, "WORLD_SIZE is 4"),
    (_small_process_group, "process group has 4 members"),
    (_whole_dataset_on_one_rank, "DistributedSampler"),
])
def test_torchrun_wrong_outcome_fails(mutate, fragment):
    results = torchrun_results(2, 2)
    mutate(results)
    assert_fails(find("03").load_checker(), outcome(results, 2, 2), fragment)
