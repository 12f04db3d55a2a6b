"""Distributed evaluation with a shared work queue (dynamic load balancing of eval shards).

Run once per node; each node spawns its workers:
    python eval_work_queue.py --node-rank R --nnodes 2 --master-addr node0 [--procs 2]
Rank 0 hosts the shard queue; every worker pulls shards until the queue is empty.
"""
import argparse
import os
import queue
from datetime import timedelta
from multiprocessing.managers import BaseManager

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

NUM_SHARDS = 24
SHARD_SIZE = 256
_shards = queue.Queue()


class ShardManager(BaseManager):
    pass


def _get_shards():
    return _shards


ShardManager.register("shards", callable=_get_shards)


def build_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4)).eval()


def evaluate_shard(model, shard_id):
    gen = torch.Generator().manual_seed(shard_id)
    x = torch.randn(SHARD_SIZE, 16, generator=gen)
    y = torch.randint(0, 4, (SHARD_SIZE,), generator=gen)
    with torch.no_grad():
        pred = model(x).argmax(dim=1)
    return int((pred == y).sum()), SHARD_SIZE


def worker(local_rank, args):
    rank = args.node_rank * args.procs + local_rank
    world = args.nnodes * args.procs
    queue_port = args.master_port + 1

    server = None
    if rank == 0:
        server = ShardManager(address=("", queue_port))
        server.start()
        q = server.shards()
        for s in range(NUM_SHARDS):
            q.put(s)

    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", init_method=f"tcp://{args.master_addr}:{args.master_port}",
                            rank=rank, world_size=world, timeout=timeout)
    dist.barrier()

    client = ShardManager(address=(args.master_addr, queue_port))
    client.connect()
    shards = client.shards()

    model = build_model()
    correct = total = done = 0
    while True:
        try:
            shard_id = shards.get_nowait()
        except queue.Empty:
            break
        c, n = evaluate_shard(model, shard_id)
        correct, total, done = correct + c, total + n, done + 1
    print(f"rank {rank}: evaluated {done} shards", flush=True)

    stats = torch.tensor([correct, total, done], dtype=torch.float64)
    dist.all_reduce(stats)
    if rank == 0:
        print(f"accuracy {stats[0] / stats[1]:.4f} over {int(stats[2])} shards", flush=True)
    dist.barrier()
    if server is not None:
        server.shutdown()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--node-rank", type=int, required=True)
    p.add_argument("--nnodes", type=int, required=True)
    p.add_argument("--master-addr", default=os.environ.get("MASTER_ADDR", "node0"))
    p.add_argument("--master-port", type=int, default=int(os.environ.get("MASTER_PORT", "29500")))
    p.add_argument("--procs", type=int, default=2)
    args = p.parse_args()
    mp.spawn(worker, args=(args,), nprocs=args.procs, join=True)


if __name__ == "__main__":
    main()
