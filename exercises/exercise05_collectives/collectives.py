"""Exercise 05: the eight collectives, each on small integer tensors whose results are known in closed form.

Every rank runs the same calls in the same order (a collective is a meeting of all ranks).
Ranks that receive nothing from a rooted collective (gather, reduce) report None.
gloo has no list-based all_to_all, so the tensor form all_to_all_single is used (it works on NCCL too).
"""

import torch
import torch.distributed as dist

import labkit

SCATTER_SRC = 0
GATHER_DST = 0


def broadcast(rank: int, world: int, device) -> list:
    # Every rank starts with its own values; the last rank's overwrite them all.
    values = torch.tensor([10 * rank + 1, 10 * rank + 2], device=device)
    dist.broadcast(values, src=world - 1)
    return values.tolist()


def scatter(rank: int, world: int, device) -> list:
    received = torch.zeros(2, dtype=torch.int64, device=device)
    pieces = [torch.tensor([10 * i, 10 * i + 1], device=device) for i in range(world)] if rank == SCATTER_SRC else None
    dist.scatter(received, scatter_list=pieces, src=SCATTER_SRC)
    return received.tolist()


def gather(rank: int, world: int, device) -> list | None:
    mine = torch.tensor([rank * rank], device=device)
    into = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(world)] if rank == GATHER_DST else None
    dist.gather(mine, gather_list=into, dst=GATHER_DST)
    return [piece.item() for piece in into] if rank == GATHER_DST else None


def reduce(rank: int, world: int, device) -> int | None:
    # Only dst's tensor holds the sum afterwards; the others' are scratch space.
    value = torch.tensor([rank + 1], device=device)
    dst = world - 1
    dist.reduce(value, dst=dst, op=dist.ReduceOp.SUM)
    return value.item() if rank == dst else None


def all_reduce_sum(rank: int, world: int, device) -> int:
    value = torch.tensor([rank + 1], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.SUM)
    return value.item()


def all_reduce_max(rank: int, world: int, device) -> int:
    value = torch.tensor([rank * rank], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return value.item()


def all_gather(rank: int, world: int, device) -> list:
    into = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(world)]
    dist.all_gather(into, torch.tensor([rank * rank], device=device))
    return [piece.item() for piece in into]


def reduce_scatter(rank: int, world: int, device) -> int:
    # Element j of every rank's input is summed into rank j's output.
    contribution = torch.tensor([rank + 100 * j for j in range(world)], device=device)
    output = torch.zeros(1, dtype=torch.int64, device=device)
    dist.reduce_scatter_single(output, contribution, op=dist.ReduceOp.SUM)
    return output.item()


def all_to_all(rank: int, world: int, device) -> list:
    # Element j goes to rank j: the world-by-world matrix of 100 * sender + receiver gets transposed.
    outgoing = torch.tensor([100 * rank + j for j in range(world)], device=device)
    incoming = torch.zeros(world, dtype=torch.int64, device=device)
    dist.all_to_all_single(incoming, outgoing)
    return incoming.tolist()


COLLECTIVES = (broadcast, scatter, gather, reduce, all_reduce_sum, all_reduce_max, all_gather, reduce_scatter,
               all_to_all)


def main() -> None:
    ids = labkit.torchrun_env()
    rank, world = ids["rank"], ids["world_size"]
    backend, device = labkit.init(local_rank=ids["local_rank"])
    outcomes = {collective.__name__: collective(rank, world, device) for collective in COLLECTIVES}
    for name, value in outcomes.items():
        labkit.log(rank, f"{name:>15}: {value}")
    labkit.write_result(rank, world_size=world, backend=backend, **outcomes)
    labkit.finish()


if __name__ == "__main__":
    main()
