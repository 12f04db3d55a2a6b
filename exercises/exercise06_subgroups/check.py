"""Checks for exercise 06: group membership, group ranks and per-group sums, computed here from the world size."""

from lab.jobs.checks import Check, RunOutcome, all_ranks_present, every_rank


def members_of(rank: int, world: int) -> list[int]:
    """The even ranks or the odd ranks: the group `rank` belongs to."""
    return list(range(rank % 2, world, 2))


def check(run: RunOutcome) -> list[Check]:
    world = run.world_size
    results = run.results

    def members(result: dict) -> list[int]:
        return members_of(result.get("rank", -1), world)

    return [
        all_ranks_present(run, world),
        every_rank("each rank is in the group of its parity", results, "group",
                   lambda result: "even" if result.get("rank", -1) % 2 == 0 else "odd"),
        every_rank("each group holds exactly the ranks of its parity", results, "members", members),
        every_rank("group rank is the rank's position in its group (rank // 2)", results, "group_rank",
                   lambda result: result.get("rank", -1) // 2),
        every_rank("group size is the number of ranks of that parity", results, "group_size",
                   lambda result: len(members(result))),
        every_rank("outside its group a rank has group rank -1", results, "rank_in_other_group", -1),
        every_rank("all_reduce in a group sums (rank + 1) over its members only", results, "group_sum",
                   lambda result: sum(member + 1 for member in members(result))),
        every_rank("broadcast in a group delivers its last member's value", results, "broadcast_from_last_member",
                   lambda result: 10 * members(result)[-1]),
        every_rank(f"all_reduce on the world still sums over all {world} ranks", results, "world_sum",
                   world * (world + 1) // 2),
    ]
