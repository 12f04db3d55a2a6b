"""Checks for exercise 09: shards are disjoint and complete, set_epoch reshuffles, forgetting it repeats, padding
fills an uneven dataset. Expected sizes come from the world size (10 samples per rank)."""

import math

from lab.jobs.checks import Check, RunOutcome, all_ranks_present, every_rank

SAMPLES_PER_RANK = 10


def shards(results: dict[int, dict], key: str, epoch: str | None = None) -> dict[int, list]:
    """rank -> the indices it saw: the list under `key`, or its `epoch` entry when `key` holds one list per epoch."""
    picked = {}
    for rank, result in sorted(results.items()):
        value = result.get(key) or ({} if epoch is not None else [])
        picked[rank] = list((value.get(epoch) if epoch is not None else value) or [])
    return picked


def epochs_of(results: dict[int, dict], key: str) -> list[str]:
    return sorted(results.get(0, {}).get(key) or {}, key=int)


def global_order(per_rank: dict[int, list], world: int) -> list:
    """Undo the sharding: rank r took positions r, r + world, r + 2 * world, ... of the epoch's permutation."""
    order = [None] * sum(len(shard) for shard in per_rank.values())
    for rank, shard in per_rank.items():
        if len(order[rank::world]) != len(shard):
            return []
        order[rank::world] = shard
    return order


def partition_problems(per_rank: dict[int, list], size: int) -> list[str]:
    """What keeps the shards from being a partition of range(size)."""
    seen = [index for shard in per_rank.values() for index in shard]
    problems = [f"{len(seen) - len(set(seen))} indices seen twice"] if len(seen) != len(set(seen)) else []
    if set(seen) != set(range(size)):
        problems.append(f"missing {sorted(set(range(size)) - set(seen))[:8]}, foreign {sorted(set(seen) - set(range(size)))[:8]}")
    return problems


def lengths(name: str, per_rank: dict, length: int) -> Check:
    wrong = {owner: len(items) for owner, items in per_rank.items() if len(items) != length}
    return Check(name, bool(per_rank) and not wrong, f"lengths {wrong}" if wrong else "")


def check(run: RunOutcome) -> list[Check]:
    world = run.world_size
    results = run.results
    size = SAMPLES_PER_RANK * world
    epochs = epochs_of(results, "with_set_epoch")
    per_epoch = {(rank, epoch): shard for epoch in epochs for rank, shard in shards(results, "with_set_epoch", epoch).items()}
    problems = [f"{key} epoch {epoch}: {problem}" for key in ("with_set_epoch", "without_set_epoch")
                for epoch in epochs_of(results, key) for problem in partition_problems(shards(results, key, epoch), size)]
    orders = {epoch: global_order(shards(results, "with_set_epoch", epoch), world) for epoch in epochs}
    repeats = [(a, b) for i, a in enumerate(epochs) for b in epochs[i + 1:] if orders[a] == orders[b]]
    uneven = size + 1
    padded_length = math.ceil(uneven / world)
    padded_seen = [index for shard in shards(results, "padded_shard").values() for index in shard]
    repeated = len(padded_seen) - len(set(padded_seen))
    padded_ok = set(padded_seen) == set(range(uneven)) and repeated == padded_length * world - uneven
    return [
        all_ranks_present(run, world),
        every_rank(f"dataset has {SAMPLES_PER_RANK} * {world} = {size} samples", results, "dataset_size", size),
        Check("at least 2 epochs reported", len(epochs) >= 2, "" if len(epochs) >= 2 else f"epochs {epochs}"),
        lengths(f"every rank saw {SAMPLES_PER_RANK} samples in every epoch", per_epoch, SAMPLES_PER_RANK),
        Check(f"in every epoch the shards are disjoint and cover all {size} samples", bool(epochs) and not problems,
              "; ".join(problems[:4])),
        Check("with set_epoch every epoch has its own order", bool(epochs) and not repeats,
              f"same order in epochs {repeats}" if repeats else ""),
        every_rank("without set_epoch every epoch repeats epoch 0's order", results, "without_set_epoch",
                   lambda result: {epoch: (result.get("with_set_epoch") or {}).get("0") for epoch in epochs}),
        lengths(f"uneven dataset of {uneven}: every rank gets ceil({uneven} / {world}) = {padded_length} samples",
                shards(results, "padded_shard"), padded_length),
        Check(f"padding covers all {uneven} samples by repeating {padded_length * world - uneven}", padded_ok,
              "" if padded_ok else f"{len(set(padded_seen))} distinct samples, {repeated} repeated"),
    ]
