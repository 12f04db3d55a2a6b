"""Data-parallel training that rebalances the per-rank batch size inside each node (torchrun, 2 processes per node).

After a short warm-up every rank measures its own throughput; the ranks of a node exchange their measurements over a
node-local subgroup (new_subgroups) and split the node's share of the global batch in proportion to speed, so a slow
process (a noisy neighbour, a busy core) gets fewer samples. The gradients are weighted by the batch sizes.
"""
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist

DIM, CLASSES, GLOBAL_BATCH = 64, 10, 256


def batches(rank, seed=0):
    g = torch.Generator().manual_seed(seed + rank)
    teacher = torch.randn(DIM, CLASSES, generator=torch.Generator().manual_seed(seed))
    while True:
        x = torch.randn(GLOBAL_BATCH, DIM, generator=g)
        yield x, (x @ teacher).argmax(1)


def train_step(model, opt, x, y, weight):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y) * weight
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
    opt.step()
    return loss.item()


def measure_throughput(model, x, repeats=20):
    started = time.perf_counter()
    with torch.no_grad():
        for _ in range(repeats):
            model(x)
    return repeats * x.shape[0] / (time.perf_counter() - started)


def node_batch_sizes(node_group, my_speed, node_batch):
    """Split the node's batch among its ranks in proportion to their measured speed."""
    speeds = [None] * dist.get_world_size()
    dist.all_gather_object(speeds, {"rank": dist.get_rank(), "samples_per_s": my_speed}, group=node_group)
    total = sum(entry["samples_per_s"] for entry in speeds)
    sizes = [max(1, int(node_batch * entry["samples_per_s"] / total)) for entry in speeds]
    sizes[0] += node_batch - sum(sizes)
    return sizes


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    local_world = int(os.environ["LOCAL_WORLD_SIZE"])
    node_group, _ = dist.new_subgroups(group_size=local_world)
    local_rank = dist.get_rank(node_group)

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(DIM, 256), torch.nn.ReLU(), torch.nn.Linear(256, CLASSES))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    data = batches(rank)

    my_batch = GLOBAL_BATCH // world
    for step in range(40):
        if step == 10:
            x, _ = next(data)
            speed = measure_throughput(model, x[:my_batch])
            sizes = node_batch_sizes(node_group, speed, GLOBAL_BATCH // (world // local_world))
            my_batch = sizes[local_rank]
            print(f"rank {rank}: {speed:.0f} samples/s -> batch {my_batch} of {sizes}", flush=True)
        x, y = next(data)
        loss = train_step(model, opt, x[:my_batch], y[:my_batch], my_batch / GLOBAL_BATCH)
        if rank == 0 and step % 10 == 0:
            print(f"step {step} loss {loss:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
