import datetime
import json
import os
import random
import socket
import time

import torch
import torch.distributed as dist
import torch.nn as nn

PLAN_PORT = int(os.environ.get("PLAN_PORT", "29537"))
N_SHARDS = 32
EPOCHS = 3


def serve_plan(epoch, world):
    rng = random.Random(epoch)
    shards = list(range(N_SHARDS))
    rng.shuffle(shards)
    plan = {r: shards[r::world] for r in range(world)}
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("0.0.0.0", PLAN_PORT))
    srv.listen(world)
    dist.barrier()
    served = 0
    while served < world - 1:
        conn, _ = srv.accept()
        want = int(conn.recv(16).decode().strip())
        conn.sendall(json.dumps({"epoch": epoch, "shards": plan[want]}).encode())
        conn.close()
        served += 1
    srv.close()
    return plan[0]


def fetch_plan(rank, master, deadline_s=30.0):
    dist.barrier()
    end = time.time() + deadline_s
    while True:
        try:
            with socket.create_connection((master, PLAN_PORT), timeout=5) as s:
                s.sendall(f"{rank:<16d}".encode())
                chunks = []
                while True:
                    data = s.recv(4096)
                    if not data:
                        break
                    chunks.append(data)
            return json.loads(b"".join(chunks))["shards"]
        except OSError:
            if time.time() > end:
                raise
            time.sleep(0.5)


def shard_batches(shard_ids, features=16):
    for sid in shard_ids:
        g = torch.Generator().manual_seed(sid)
        x = torch.randn(32, features, generator=g)
        yield x, x.sum(dim=1, keepdim=True)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    master = os.environ["MASTER_ADDR"]

    torch.manual_seed(0)
    model = nn.Linear(16, 1)
    for p in model.parameters():
        dist.broadcast(p.data, src=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    for epoch in range(EPOCHS):
        shard_ids = serve_plan(epoch, world) if rank == 0 else fetch_plan(rank, master)
        total = torch.zeros(1)
        for x, y in shard_batches(shard_ids):
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            for p in model.parameters():
                dist.all_reduce(p.grad)
                p.grad /= world
            opt.step()
            total += loss.detach()
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch}: {len(shard_ids)} shards on rank 0, mean loss {total.item() / N_SHARDS:.4f}",
                  flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
