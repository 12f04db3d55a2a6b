"""DDP training under a wall-clock budget (the cluster slot is short): each rank tokenises its own shard of the
corpus, then trains until TRAIN_SECONDS have passed, then everyone meets at a barrier and rank 0 saves."""
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

TRAIN_SECONDS = float(os.environ.get("TRAIN_SECONDS", "8"))


def tokenise_shard(rank: int) -> torch.Tensor:
    """The shards are not the same size: shard 1 holds the long documents."""
    docs = 30_000 if rank == 0 else 1_000_000
    vocab = {}
    ids = []
    for i in range(docs):
        word = f"w{(i * 7919 + rank) % 5003}"
        ids.append(vocab.setdefault(word, len(vocab)))
    return torch.tensor(ids[: 64 * 32]).reshape(-1, 32) % 512


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Embedding(512, 64), nn.Flatten(), nn.Linear(64 * 32, 256), nn.ReLU(),
                              nn.Linear(256, 512)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    data = tokenise_shard(rank)
    print(f"rank {rank}: {len(data)} sequences ready", flush=True)

    deadline = time.monotonic() + TRAIN_SECONDS
    step = 0
    while True:
        batch = data[(step * 8) % len(data):(step * 8) % len(data) + 8]
        logits = model(batch)
        loss = nn.functional.cross_entropy(logits, batch[:, 0])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if time.monotonic() > deadline:
            break
    print(f"rank {rank}: time budget used after {step} steps", flush=True)

    dist.barrier()
    if rank == 0:
        torch.save(model.module.state_dict(), "/tmp/budget_model.pt")
        print("saved", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
