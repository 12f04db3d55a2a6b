"""Checks for exercise 07: messages reached the right ranks, and the ring all-reduce equals dist.all_reduce and the closed form."""

from lab.jobs.checks import Check, RunOutcome, all_ranks_present, every_rank


def check(run: RunOutcome) -> list[Check]:
    world = run.world_size
    results = run.results
    # Rank r contributes (r + 1) * [1, 2, ..., 3 * world + 1]; the sum is 1+...+world times that vector.
    triangle = world * (world + 1) // 2
    expected_sum = [float(triangle * i) for i in range(1, 3 * world + 2)]
    return [
        all_ranks_present(run, world),
        every_rank("send/recv: rank r received 100 + r from rank 0 (rank 0 received nothing)", results, "from_rank0",
                   lambda result: None if result.get("rank") == 0 else 100 + result.get("rank", -1)),
        every_rank("isend/irecv: every rank received its left neighbour's rank", results, "from_left",
                   lambda result: (result.get("rank", -1) - 1) % world),
        every_rank(f"dist.all_reduce gave (1+...+{world}) * [1..{3 * world + 1}]", results, "all_reduce", expected_sum),
        every_rank("the ring all-reduce gave the same sum", results, "ring_all_reduce", expected_sum),
        every_rank("ring all-reduce equals dist.all_reduce on every rank", results, "ring_all_reduce",
                   lambda result: result.get("all_reduce")),
        every_rank(f"each rank sent 2 * (world - 1) = {2 * (world - 1)} ring messages", results, "ring_messages",
                   2 * (world - 1)),
    ]
