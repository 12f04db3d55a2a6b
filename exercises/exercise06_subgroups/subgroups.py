"""Exercise 06: sub-groups of the world with new_group: even ranks and odd ranks.

new_group is itself a collective over the whole world: every rank must call it for every
group, in the same order, including groups it is not a member of. Collectives then take a
`group=` argument; src/dst stay global ranks. Outside its group a rank has group rank -1.
"""

import torch
import torch.distributed as dist

import labkit


def main() -> None:
    ids = labkit.torchrun_env()
    rank, world = ids["rank"], ids["world_size"]
    if world < 2:
        labkit.fail("exercise 06 needs at least 2 ranks (an even and an odd one)")
    backend, device = labkit.init(local_rank=ids["local_rank"])
    members = {"even": list(range(0, world, 2)), "odd": list(range(1, world, 2))}
    # Every rank creates both groups, in the same order, even the one it will never use.
    groups = {name: dist.new_group(ranks) for name, ranks in members.items()}
    mine = "even" if rank % 2 == 0 else "odd"
    other = "odd" if mine == "even" else "even"
    group = groups[mine]

    group_sum = torch.tensor([rank + 1], device=device)
    dist.all_reduce(group_sum, group=group)
    # broadcast inside the group from its last member, named by its global rank.
    leader = members[mine][-1]
    from_leader = torch.tensor([10 * rank], device=device)
    dist.broadcast(from_leader, src=leader, group=group)
    world_sum = torch.tensor([rank + 1], device=device)
    dist.all_reduce(world_sum)

    labkit.log(rank, f"{mine} group {members[mine]}: group rank {dist.get_rank(group)}, "
                     f"group sum {group_sum.item()}, from rank {leader}: {from_leader.item()}, world sum {world_sum.item()}")
    labkit.write_result(rank, world_size=world, backend=backend, group=mine, members=members[mine],
                        group_rank=dist.get_rank(group), group_size=dist.get_world_size(group),
                        rank_in_other_group=dist.get_rank(groups[other]), group_sum=group_sum.item(),
                        broadcast_from_last_member=from_leader.item(), world_sum=world_sum.item())
    labkit.finish()


if __name__ == "__main__":
    main()
