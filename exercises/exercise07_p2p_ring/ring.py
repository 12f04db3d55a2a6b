"""Exercise 07: point-to-point messages, and an all_reduce built from them.

First rank 0 sends each rank a message with blocking send/recv, and every rank passes its
rank to its right-hand neighbour with isend/irecv. Then a ring all-reduce (reduce-scatter,
then all-gather, 2 * (world - 1) messages per rank) sums a vector; dist.all_reduce sums the
same vector so the two can be compared.
"""

import torch
import torch.distributed as dist

import labkit


def exchange(outgoing: torch.Tensor, incoming: torch.Tensor, to_rank: int, from_rank: int) -> None:
    """Send to one neighbour while receiving from the other; posting both at once cannot deadlock."""
    requests = dist.batch_isend_irecv([dist.P2POp(dist.isend, outgoing, to_rank),
                                       dist.P2POp(dist.irecv, incoming, from_rank)])
    for request in requests:
        request.wait()


def ring_all_reduce(values: torch.Tensor, rank: int, world: int) -> int:
    """Sum `values` over all ranks in place, passing chunks around the ring; returns the messages sent."""
    chunks = list(values.tensor_split(world))  # views: adding into a chunk updates `values`
    right, left = (rank + 1) % world, (rank - 1) % world
    sent = 0
    # Reduce-scatter: after world - 1 rounds rank r holds the full sum of chunk (r + 1) % world.
    for step in range(world - 1):
        outgoing, arriving = chunks[(rank - step) % world], chunks[(rank - step - 1) % world]
        incoming = torch.empty_like(arriving)
        exchange(outgoing.contiguous(), incoming, right, left)
        arriving += incoming
        sent += 1
    # All-gather: the finished chunks travel once more around the ring, replacing partial sums.
    for step in range(world - 1):
        outgoing, arriving = chunks[(rank + 1 - step) % world], chunks[(rank - step) % world]
        incoming = torch.empty_like(arriving)
        exchange(outgoing.contiguous(), incoming, right, left)
        arriving.copy_(incoming)
        sent += 1
    return sent


def point_to_point(rank: int, world: int, device) -> tuple[int | None, int]:
    """rank 0 -> everyone with blocking send/recv, then everyone -> right neighbour with isend/irecv."""
    from_rank0 = None
    if rank == 0:
        for destination in range(1, world):
            dist.send(torch.tensor([100 + destination], device=device), dst=destination)
    else:
        message = torch.zeros(1, dtype=torch.int64, device=device)
        dist.recv(message, src=0)
        from_rank0 = message.item()
    from_left = torch.zeros(1, dtype=torch.int64, device=device)
    exchange(torch.tensor([rank], device=device), from_left, (rank + 1) % world, (rank - 1) % world)
    return from_rank0, from_left.item()


def main() -> None:
    ids = labkit.torchrun_env()
    rank, world = ids["rank"], ids["world_size"]
    backend, device = labkit.init(local_rank=ids["local_rank"])
    from_rank0, from_left = point_to_point(rank, world, device)

    # 3 * world + 1 elements: the chunks are uneven, as they are in real buckets.
    length = 3 * world + 1
    mine = torch.arange(1, length + 1, dtype=torch.float32, device=device) * (rank + 1)
    by_ring = mine.clone()
    messages = ring_all_reduce(by_ring, rank, world)
    by_library = mine.clone()
    dist.all_reduce(by_library)

    labkit.log(rank, f"from rank 0: {from_rank0}, from left: {from_left}; ring {by_ring.tolist()} "
                     f"in {messages} messages; all_reduce {by_library.tolist()}")
    labkit.write_result(rank, world_size=world, backend=backend, from_rank0=from_rank0, from_left=from_left,
                        ring_all_reduce=by_ring.tolist(), all_reduce=by_library.tolist(), ring_messages=messages)
    labkit.finish()


if __name__ == "__main__":
    main()
