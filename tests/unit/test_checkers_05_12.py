"""The checkers of exercises 05-12 on hand-built outcomes: results simulated here in plain Python (not with the
checkers' own formulas) pass, and each kind of wrong result fails the check that is about it."""

import math
import random

import pytest

from lab.jobs.checks import RunOutcome, StepOutcome, load_sibling
from lab.jobs.exercises import find
from tests.unit.checker_helpers import assert_fails, failed, outcome


def base(rank: int, world: int, k: int = 2) -> dict:
    return {"rank": rank, "world_size": world, "node_rank": rank // k, "hostname": f"node{rank // k}", "backend": "gloo"}


# --- exercise 05: the eight collectives -------------------------------------------------------------------------

def collectives_results(world: int) -> dict[int, dict]:
    """Each collective played out on the inputs collectives.py gives every rank."""
    ranks = range(world)
    own_pair = {r: [10 * r + 1, 10 * r + 2] for r in ranks}
    rows = {r: [r + 100 * j for j in ranks] for r in ranks}  # reduce_scatter input
    outgoing = {r: [100 * r + j for j in ranks] for r in ranks}  # all_to_all input
    squares = [r * r for r in ranks]
    return {r: {**base(r, world),
                "broadcast": own_pair[world - 1],
                "scatter": [[10 * i, 10 * i + 1] for i in ranks][r],
                "gather": squares if r == 0 else None,
                "reduce": sum(q + 1 for q in ranks) if r == world - 1 else None,
                "all_reduce_sum": sum(q + 1 for q in ranks),
                "all_reduce_max": max(squares),
                "all_gather": squares,
                "reduce_scatter": sum(rows[q][r] for q in ranks),
                "all_to_all": [outgoing[q][r] for q in ranks]} for r in ranks}


@pytest.mark.parametrize("world", [4, 6])
def test_collectives_correct_outcome_passes(world):
    assert failed(find("05").load_checker(), outcome(collectives_results(world), world // 2, 2)) == []


@pytest.mark.parametrize("key, rank, value, fragment", [
    ("broadcast", 2, [1, 2], "broadcast"),
    ("scatter", 1, [0, 1], "scatter"),
    ("gather", 1, [0, 1, 4, 9], "gather"),
    ("reduce", 0, 10, "reduce:"),
    ("all_reduce_sum", 3, 6, "all_reduce SUM"),
    ("all_reduce_max", 0, 0, "all_reduce MAX"),
    ("all_gather", 2, [9, 4, 1, 0], "all_gather"),
    ("reduce_scatter", 1, 6, "reduce_scatter"),
    ("all_to_all", 1, [100, 101, 102, 103], "all_to_all"),  # its own row back: not transposed
])
def test_collectives_wrong_value_fails(key, rank, value, fragment):
    results = collectives_results(4)
    results[rank][key] = value
    assert_fails(find("05").load_checker(), outcome(results, 2, 2), fragment)


def test_collectives_missing_rank_fails():
    results = collectives_results(4)
    del results[0]
    assert_fails(find("05").load_checker(), outcome(results, 2, 2), "ranks reported")


# --- exercise 06: even and odd sub-groups -----------------------------------------------------------------------

def subgroup_results(world: int) -> dict[int, dict]:
    results = {}
    for r in range(world):
        members = [q for q in range(world) if q % 2 == r % 2]
        results[r] = {**base(r, world), "group": "even" if r % 2 == 0 else "odd", "members": members,
                      "group_rank": members.index(r), "group_size": len(members), "rank_in_other_group": -1,
                      "group_sum": sum(q + 1 for q in members), "broadcast_from_last_member": 10 * members[-1],
                      "world_sum": sum(q + 1 for q in range(world))}
    return results


@pytest.mark.parametrize("world", [2, 4, 5])
def test_subgroups_correct_outcome_passes(world):
    assert failed(find("06").load_checker(), outcome(subgroup_results(world), world, 1)) == []


@pytest.mark.parametrize("key, rank, value, fragment", [
    ("group_rank", 2, 2, "group rank is the rank's position"),  # the global rank, not the rank inside the group
    ("group", 1, "even", "group of its parity"),
    ("members", 0, [0, 1], "exactly the ranks of its parity"),
    ("group_size", 3, 4, "group size"),
    ("rank_in_other_group", 0, 0, "outside its group"),
    ("group_sum", 1, 10, "all_reduce in a group"),  # summed over the world instead of the group
    ("broadcast_from_last_member", 0, 0, "broadcast in a group"),
    ("world_sum", 2, 4, "all_reduce on the world"),
])
def test_subgroups_wrong_value_fails(key, rank, value, fragment):
    results = subgroup_results(4)
    results[rank][key] = value
    assert_fails(find("06").load_checker(), outcome(results, 2, 2), fragment)


# --- exercise 07: point-to-point and a ring all-reduce -----------------------------------------------------------

def ring_results(world: int) -> dict[int, dict]:
    vectors = {r: [float((r + 1) * i) for i in range(1, 3 * world + 2)] for r in range(world)}
    summed = [sum(column) for column in zip(*vectors.values())]
    return {r: {**base(r, world), "from_rank0": None if r == 0 else 100 + r, "from_left": (r - 1) % world,
                "all_reduce": summed, "ring_all_reduce": list(summed), "ring_messages": 2 * (world - 1)}
            for r in range(world)}


@pytest.mark.parametrize("world", [2, 4, 5])
def test_ring_correct_outcome_passes(world):
    assert failed(find("07").load_checker(), outcome(ring_results(world), world, 1)) == []


def test_ring_differs_from_all_reduce_fails():
    results = ring_results(4)
    results[2]["ring_all_reduce"][5] += 1.0  # one chunk's partial sum never got replaced
    checker = find("07").load_checker()
    assert_fails(checker, outcome(results, 2, 2), "ring all-reduce gave the same sum")
    assert_fails(checker, outcome(results, 2, 2), "equals dist.all_reduce")


@pytest.mark.parametrize("key, rank, value, fragment", [
    ("from_left", 1, 2, "left neighbour"),  # sent the wrong way round the ring
    ("from_rank0", 0, 100, "send/recv"),
    ("from_rank0", 3, 101, "send/recv"),
    ("ring_messages", 0, 3, "ring messages"),
    ("all_reduce", 1, [0.0] * 13, "dist.all_reduce gave"),
])
def test_ring_wrong_value_fails(key, rank, value, fragment):
    results = ring_results(4)
    results[rank][key] = value
    assert_fails(find("07").load_checker(), outcome(results, 2, 2), fragment)


# --- exercise 08: gradient averaging three ways -----------------------------------------------------------------

def averaging_results(world: int) -> dict[int, dict]:
    return {r: {**base(r, world, 1), "steps": 5, "initial_hash": f"init{r}", "by_hand_hash": "trained",
                "by_hook_hash": "trained", "by_ddp_hash": "trained", "no_broadcast_hash": f"drifted{r}"}
            for r in range(world)}


@pytest.mark.parametrize("world", [2, 3])
def test_averaging_correct_outcome_passes(world):
    assert failed(find("08").load_checker(), outcome(averaging_results(world), world, 1)) == []


def _ddp_replicas_differ(results):
    results[1]["by_ddp_hash"] = "other"


def _hooks_differ_from_hand(results):
    for result in results.values():
        result["by_hook_hash"] = "hooked"


def _hand_replicas_differ(results):
    results[0]["by_hand_hash"] = "other"


def _seeded_init(results):
    for result in results.values():
        result["initial_hash"] = "seeded"


def _no_broadcast_still_identical(results):
    for result in results.values():
        result["no_broadcast_hash"] = "same"


def _untrained(results):
    results[0]["by_hand_hash"] = results[0]["initial_hash"]


@pytest.mark.parametrize("mutate, fragment", [
    (_ddp_replicas_differ, "by DDP: replicas identical"),
    (_ddp_replicas_differ, "DDP gives the same parameters"),
    (_hooks_differ_from_hand, "hooks give the same parameters"),
    (_hand_replicas_differ, "by hand"),
    (_seeded_init, "initial weights differ"),
    (_no_broadcast_still_identical, "without the initial broadcast"),
    (_untrained, "training changed the weights"),
])
def test_averaging_wrong_outcome_fails(mutate, fragment):
    results = averaging_results(2)
    mutate(results)
    assert_fails(find("08").load_checker(), outcome(results, 2, 1), fragment)


# --- exercise 09: DistributedSampler and set_epoch --------------------------------------------------------------

def sampler_results(world: int, epochs: int = 3) -> dict[int, dict]:
    """DistributedSampler's scheme: one permutation per seed (+ epoch) on every rank, rank r takes r, r + world, ...;
    padded with the permutation's head up to a multiple of world."""
    size = 10 * world

    def permutation(count: int, epoch: int) -> list[int]:
        return random.Random(epoch).sample(range(count), count)

    padded = permutation(size + 1, 0)
    padded += padded[: math.ceil((size + 1) / world) * world - len(padded)]
    return {r: {**base(r, world), "dataset_size": size,
                "with_set_epoch": {str(e): permutation(size, e)[r::world] for e in range(epochs)},
                "without_set_epoch": {str(e): permutation(size, 0)[r::world] for e in range(epochs)},
                "uneven_dataset_size": size + 1, "padded_shard": padded[r::world]}
            for r in range(world)}


@pytest.mark.parametrize("world", [2, 4, 3])
def test_sampler_correct_outcome_passes(world):
    assert failed(find("09").load_checker(), outcome(sampler_results(world), world, 1)) == []


def _overlapping_shards(results):
    results[1]["with_set_epoch"]["1"] = list(results[0]["with_set_epoch"]["1"])


def _no_set_epoch(results):
    for result in results.values():
        result["with_set_epoch"] = {epoch: result["with_set_epoch"]["0"] for epoch in result["with_set_epoch"]}


def _reshuffled_without_set_epoch(results):
    for result in results.values():
        result["without_set_epoch"] = dict(result["with_set_epoch"])


def _short_shard(results):
    results[2]["with_set_epoch"]["2"] = results[2]["with_set_epoch"]["2"][:-1]


def _no_padding(results):
    results[0]["padded_shard"] = results[0]["padded_shard"][:-1]


def _one_epoch(results):
    for result in results.values():
        result["with_set_epoch"] = {"0": result["with_set_epoch"]["0"]}


@pytest.mark.parametrize("mutate, fragment", [
    (_overlapping_shards, "disjoint and cover"),
    (_no_set_epoch, "with set_epoch every epoch has its own order"),
    (_reshuffled_without_set_epoch, "without set_epoch every epoch repeats"),
    (_short_shard, "every rank saw 10 samples"),
    (_no_padding, "uneven dataset of 41"),
    (_no_padding, "padding covers"),
    (_one_epoch, "at least 2 epochs"),
])
def test_sampler_wrong_outcome_fails(mutate, fragment):
    results = sampler_results(4)
    mutate(results)
    assert_fails(find("09").load_checker(), outcome(results, 2, 2), fragment)


# --- exercise 11: SyncBatchNorm on uneven batches ---------------------------------------------------------------

BATCHES = load_sibling(str(find("11").path / "check.py"), "batches")


def stats_of(samples: list[list[float]]) -> dict:
    """Per-channel mean and unbiased variance, written out here rather than taken from batches.channel_stats."""
    columns = list(zip(*samples))
    means = [sum(column) / len(column) for column in columns]
    variances = [sum((x - mean) ** 2 for x in column) / (len(column) - 1) for column, mean in zip(columns, means)]
    return {"running_mean": means, "running_var": variances}


def syncbn_results(world: int, backend: str = "gloo") -> dict[int, dict]:
    everyone = [sample for r in range(world) for sample in BATCHES.local_batch(r)]
    synced = {"AllReduceBatchNorm": stats_of(everyone)}
    if backend == "nccl":
        synced["torch.nn.SyncBatchNorm"] = stats_of(everyone)
    return {r: {**base(r, world), "backend": backend, "samples": r + 2, "plain": stats_of(BATCHES.local_batch(r)),
                "synced": dict(synced)} for r in range(world)}


@pytest.mark.parametrize("world, backend", [(4, "gloo"), (2, "gloo"), (4, "nccl")])
def test_syncbn_correct_outcome_passes(world, backend):
    assert failed(find("11").load_checker(), outcome(syncbn_results(world, backend), world // 2, 2)) == []


def _not_synchronised(results):
    results[1]["synced"] = {"AllReduceBatchNorm": results[1]["plain"]}


def _mean_of_means(results):
    """Averaging each rank's mean ignores that the ranks hold different numbers of samples."""
    channels = len(results[0]["plain"]["running_mean"])
    naive = [sum(r["plain"]["running_mean"][c] for r in results.values()) / len(results) for c in range(channels)]
    for result in results.values():
        result["synced"] = {"AllReduceBatchNorm": {**result["synced"]["AllReduceBatchNorm"], "running_mean": naive}}


def _biased_variance(results):
    for result in results.values():
        stats = result["synced"]["AllReduceBatchNorm"]
        count = sum(r + 2 for r in range(len(results)))
        stats["running_var"] = [v * (count - 1) / count for v in stats["running_var"]]


def _plain_synchronised_too(results):
    for result in results.values():
        result["plain"] = result["synced"]["AllReduceBatchNorm"]


def _even_batches(results):
    results[3]["samples"] = 2


@pytest.mark.parametrize("mutate, fragment", [
    (_not_synchronised, "AllReduceBatchNorm: running mean is the global batch's mean"),
    (_mean_of_means, "AllReduceBatchNorm: running mean is the global batch's mean"),
    (_biased_variance, "AllReduceBatchNorm: running var"),
    (_plain_synchronised_too, "plain BatchNorm: running mean is the rank's own"),
    (_plain_synchronised_too, "running means differ from rank to rank"),
    (_even_batches, "r + 2 samples"),
])
def test_syncbn_wrong_outcome_fails(mutate, fragment):
    results = syncbn_results(4)
    mutate(results)
    assert_fails(find("11").load_checker(), outcome(results, 2, 2), fragment)


def test_syncbn_on_gpus_needs_torch_syncbatchnorm():
    results = syncbn_results(4, "nccl")
    for result in results.values():
        del result["synced"]["torch.nn.SyncBatchNorm"]
    assert_fails(find("11").load_checker(), outcome(results, 2, 2), "torch.nn.SyncBatchNorm: running mean")


# --- exercise 12: troubleshooting -------------------------------------------------------------------------------

def announce(node: int, scenario: str, world: int, addr: str = "node0:29500", debug: str = "OFF") -> str:
    return f"[rank {node}] scenario {scenario}: rank {node} of {world} via {addr}, TORCH_DISTRIBUTED_DEBUG={debug}"


def broken_logs(n: int) -> dict[str, dict[int, str]]:
    """Node logs of the five broken steps as torch 2.13 with gloo prints them (abridged from a real run)."""
    alone = "DistStoreError: Timed out after 6 seconds waiting for clients. 1/{n} clients joined."
    logs = {"wrong-master-addr": {}, "wrong-port": {}, "world-size-mismatch": {}, "wrong-ifname": {}, "shape-mismatch": {}}
    for node in range(n):
        others = node != 0
        logs["wrong-master-addr"][node] = "\n".join([
            announce(node, "wrong-master-addr", n, "224.0.0.1:29500" if others else "node0:29500"),
            "[rank {0}] scenario wrong-master-addr failed: ".format(node) + (
                "DistNetworkError: The client socket has failed to connect to any network address of (224.0.0.1, "
                "29500). The client socket has failed to connect to 224.0.0.1:29500 (errno: 101 - Network is unreachable)."
                if others else alone.format(n=n))])
        logs["wrong-port"][node] = "\n".join([
            announce(node, "wrong-port", n, "node0:29501" if others else "node0:29500"),
            f"[rank {node}] scenario wrong-port failed: " + (
                "DistNetworkError: The client socket has timed out after 5000ms while trying to connect to (node0, 29501)."
                if others else alone.format(n=n))])
        logs["world-size-mismatch"][node] = "\n".join([
            announce(node, "world-size-mismatch", n + 1),
            f"[rank {node}] scenario world-size-mismatch failed: " + (
                "DistStoreError: wait timeout after 5000ms, keys: /default_pg/0//cpu//0/0" if others else
                f"DistStoreError: Timed out after 6 seconds waiting for clients. {n}/{n + 1} clients joined.")])
        logs["wrong-ifname"][node] = "\n".join([
            announce(node, "wrong-ifname", n),
            f"[rank {node}] scenario wrong-ifname failed: RuntimeError: [enforce fail at gloo/transport/tcp/device.cc:84] "
            "ifa != nullptr. Unable to find address for: nosuchif0"])
        peer = 1 if node == 0 else 0
        fingerprint = "CollectiveFingerPrint(SequenceNumber=0, OpType=ALLREDUCE, TensorShape=[{}], TensorDtypes=Float)"
        logs["shape-mismatch"][node] = "\n".join([
            announce(node, "shape-mismatch", n, debug="DETAIL"),
            f"[rank {node}] scenario shape-mismatch failed: RuntimeError: Detected mismatch between collectives on "
            f"ranks. Rank {node} is running collective: {fingerprint.format(node + 2)}, but Rank {peer} is running "
            f"collective: {fingerprint.format(peer + 2)}.Collectives differ in the following aspects: "
            f"  Tensor Tensor shapes: {node + 2}vs {peer + 2}"])
    return logs


def trouble_outcome(n: int) -> RunOutcome:
    run = RunOutcome(nnodes=n, nproc_per_node=1)
    for name, logs in broken_logs(n).items():
        run.steps[name] = StepOutcome(name, results={}, exit_codes={node: 1 for node in range(n)}, logs=logs,
                                      expect="fail")
    total = float(sum(range(1, n + 1)))
    run.steps["fixed"] = StepOutcome(
        "fixed", results={r: {**base(r, n, 1), "scenario": "none", "all_reduce": [total, total]} for r in range(n)},
        exit_codes={node: 0 for node in range(n)},
        logs={node: announce(node, "none", n) + f"\n[rank {node}] all_reduce gave [{total}, {total}]" for node in range(n)})
    return run


@pytest.mark.parametrize("n", [2, 3])
def test_trouble_correct_outcome_passes(n):
    checks = find("12").load_checker()(trouble_outcome(n))
    assert [check.name for check in checks if not check.passed] == []
    assert len(checks) > 10


def test_trouble_broken_step_that_passed_fails():
    run = trouble_outcome(2)
    run.steps["wrong-port"].exit_codes = {0: 0, 1: 0}
    assert_fails(find("12").load_checker(), run, "wrong-port: every node failed on its own")


def test_trouble_broken_step_killed_by_the_lab_fails():
    """A step that hung until the lab's timeout killed it: LAB_PG_TIMEOUT did not bound the failure."""
    run = trouble_outcome(2)
    run.steps["world-size-mismatch"].exit_codes = {0: None, 1: 137}
    assert_fails(find("12").load_checker(), run, "world-size-mismatch: every node failed on its own")


def test_trouble_missing_step_fails():
    run = trouble_outcome(2)
    del run.steps["wrong-ifname"]
    assert_fails(find("12").load_checker(), run, "wrong-ifname: every node failed on its own")


def test_trouble_broken_step_that_wrote_results_fails():
    run = trouble_outcome(2)
    run.steps["shape-mismatch"].results = {0: {"rank": 0}}
    assert_fails(find("12").load_checker(), run, "shape-mismatch: no rank got as far")


@pytest.mark.parametrize("step, node, text, fragment", [
    # failed, but for another reason: each must fail the telltale check of its step
    ("wrong-master-addr", 1, "[rank 1] scenario wrong-master-addr failed: RuntimeError: Connection reset by peer",
     "could not connect to the wrong MASTER_ADDR"),
    ("wrong-master-addr", 0, "[rank 0] scenario wrong-master-addr failed: DistStoreError: 2/2 clients joined",
     "waited for the others in vain"),
    ("wrong-port", 1, "[rank 1] scenario wrong-port failed: ValueError: bad port", "wrong MASTER_PORT"),
    ("world-size-mismatch", 0, "[rank 0] scenario world-size-mismatch failed: DistStoreError: Timed out after 6 "
     "seconds waiting for clients. 1/2 clients joined.", "counted 2 of the 3"),
    ("wrong-ifname", 1, "[rank 1] scenario wrong-ifname failed: RuntimeError: Connection refused", "no interface"),
    ("shape-mismatch", 0, "[rank 0] scenario shape-mismatch: rank 0 of 2 via node0:29500, TORCH_DISTRIBUTED_DEBUG=OFF\n"
     "[rank 0] scenario shape-mismatch failed: DistBackendError: Timed out waiting 5000ms for recv operation",
     "DETAIL named rank 0's all_reduce"),
    ("shape-mismatch", 1, "[rank 1] scenario shape-mismatch: rank 1 of 2 via node0:29500, TORCH_DISTRIBUTED_DEBUG=OFF",
     "TORCH_DISTRIBUTED_DEBUG=DETAIL was set"),
])
def test_trouble_wrong_reason_fails(step, node, text, fragment):
    run = trouble_outcome(2)
    run.steps[step].logs[node] = text
    assert_fails(find("12").load_checker(), run, f"{step}: ")
    assert_fails(find("12").load_checker(), run, fragment)


def test_trouble_shape_mismatch_names_each_rank_shape():
    run = trouble_outcome(2)
    run.steps["shape-mismatch"].logs[1] = run.steps["shape-mismatch"].logs[1].replace("TensorShape=[3]", "TensorShape=[2]")
    assert_fails(find("12").load_checker(), run, "rank 1's all_reduce of shape [3]")


def test_trouble_fixed_run_wrong_sum_fails():
    run = trouble_outcome(2)
    run.steps["fixed"].results[1]["all_reduce"] = [2.0, 2.0]
    assert_fails(find("12").load_checker(), run, "fixed: all_reduce gave 1+...+2 = 3")


def test_trouble_fixed_run_missing_rank_fails():
    run = trouble_outcome(2)
    del run.steps["fixed"].results[0]
    assert_fails(find("12").load_checker(), run, "fixed: all 2 ranks reported")
