"""Data step: plan which ranks tokenize which raw shards, then tokenize and report counts.

Rank 0 runs a tiny asyncio planning service; every other rank registers (host, free cores,
shard preferences) and gets back its shard list once all ranks have registered.
Launch: torchrun --nnodes 2 --nproc-per-node N shard_planner_service.py
"""
import asyncio
import json
import os
import socket
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist

NUM_SHARDS = 16
registry = {}
reg_lock = threading.Lock()
plan_ready = threading.Event()
PLAN = {}


def make_plan(world):
    hosts = sorted(registry.items())
    return {str(r): [s for s in range(NUM_SHARDS) if s % world == i] for i, (r, _) in enumerate(hosts)}


async def handle_register(reader, writer):
    info = json.loads(await reader.readline())
    world = info["world"]
    with reg_lock:
        registry[info["rank"]] = info
    while len(registry) < world:
        time.sleep(0.05)
    if not plan_ready.is_set():
        PLAN.update(make_plan(world))
        plan_ready.set()
    writer.write((json.dumps(PLAN[str(info["rank"])]) + "\n").encode())
    await writer.drain()
    writer.close()


def serve(port, started):
    async def run():
        server = await asyncio.start_server(handle_register, "0.0.0.0", port)
        started.set()
        async with server:
            await server.serve_forever()
    asyncio.run(run())


def tokenize_shard(shard):
    gen = torch.Generator().manual_seed(shard)
    text = torch.randint(0, 50000, (4096,), generator=gen)
    return int((text % 7 != 0).sum())


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    port = int(os.environ["MASTER_PORT"]) + 2
    me = {"rank": rank, "world": world, "host": socket.gethostname(), "cores": os.cpu_count()}

    if rank == 0:
        started = threading.Event()
        threading.Thread(target=serve, args=(port, started), daemon=True).start()
        started.wait()
        with reg_lock:
            registry[0] = me
    dist.barrier()

    if rank == 0:
        plan_ready.wait()
        my_shards = PLAN["0"]
    else:
        with socket.create_connection((os.environ["MASTER_ADDR"], port)) as sock:
            sock.sendall((json.dumps(me) + "\n").encode())
            my_shards = json.loads(sock.makefile().readline())

    tokens = sum(tokenize_shard(s) for s in my_shards)
    print(f"rank {rank} ({me['host']}): shards {my_shards} -> {tokens} tokens", flush=True)
    total = torch.tensor([tokens], dtype=torch.int64)
    dist.all_reduce(total)
    if rank == 0:
        print(f"tokenized {NUM_SHARDS} shards: {total.item()} tokens", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
