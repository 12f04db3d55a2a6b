"""Export document embeddings chunk by chunk; rank 0 schedules chunks and assembles the output.

Each request from a worker carries the finished chunk (id, then the pooled
embedding of that chunk) and asks for the next one.  The coordinator stores
the pooled vectors and writes embeddings.pt once every chunk is in.
"""
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

DIM = 16
N_CHUNKS = 14
DOCS_PER_CHUNK = 24
IDLE = -1
STOP = -2


def encoder():
    torch.manual_seed(1234)
    return nn.Sequential(nn.Embedding(500, DIM), nn.Linear(DIM, DIM), nn.Tanh()).eval()


def embed_chunk(model, chunk_id):
    g = torch.Generator().manual_seed(chunk_id)
    tokens = torch.randint(0, 500, (DOCS_PER_CHUNK, 32), generator=g)
    with torch.no_grad():
        pooled = model(tokens).mean(dim=1).mean(dim=0)
    time.sleep(0.05 + 0.03 * (chunk_id % 4))
    return pooled


def coordinator(world):
    todo = list(range(N_CHUNKS))
    pooled = {}
    msg = torch.zeros(1 + DIM)

    def receive():
        src = dist.recv(msg)
        chunk_id = int(msg[0])
        if chunk_id >= 0:
            pooled[chunk_id] = msg[1:].clone()
        return src

    while todo:
        src = receive()
        dist.send(torch.tensor([todo.pop(0)]), dst=src)
        print(f"[coord] {len(pooled)} chunks in, {len(todo)} queued", flush=True)

    src = receive()
    dist.send(torch.tensor([STOP]), dst=src)

    missing = sorted(set(range(N_CHUNKS)) - set(pooled))
    if missing:
        raise RuntimeError(f"export incomplete: no embeddings for chunks {missing} "
                           f"({len(pooled)}/{N_CHUNKS} received)")
    table = torch.stack([pooled[c] for c in range(N_CHUNKS)])
    torch.save({"embeddings": table, "dim": DIM}, "embeddings.pt")
    print(f"[coord] wrote embeddings.pt {tuple(table.shape)}", flush=True)


def worker(rank):
    model = encoder()
    msg = torch.full((1 + DIM,), 0.0)
    msg[0] = IDLE
    task = torch.zeros(1, dtype=torch.long)
    count = 0
    while True:
        dist.send(msg, dst=0)
        dist.recv(task, src=0)
        chunk_id = int(task[0])
        if chunk_id == STOP:
            break
        msg = torch.cat([torch.tensor([float(chunk_id)]), embed_chunk(model, chunk_id)])
        count += 1
    print(f"[rank {rank}] embedded {count} chunks", flush=True)


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        coordinator(world)
    else:
        worker(rank)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
