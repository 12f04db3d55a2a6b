"""Train a small classifier with DDP over 2 nodes; a data-pipeline audit checks that each epoch is reshuffled."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

EPOCHS = 3


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    features = torch.randn(256, 16)
    labels = (features[:, :4].sum(1) > 0).long()
    data = TensorDataset(torch.arange(256), features, labels)
    sampler = DistributedSampler(data, shuffle=True, seed=17)
    loader = DataLoader(data, batch_size=16, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    first_batches = []
    for epoch in range(EPOCHS):
        total = 0.0
        for step, (ids, x, y) in enumerate(loader):
            if step == 0:
                first_batches.append(ids.tolist())
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            total += loss.item()
        print(f"rank {rank} epoch {epoch} loss {total / len(loader):.4f}", flush=True)
    # audit: a shuffled pipeline must not start every epoch with the same batch
    repeats = [e for e in range(1, EPOCHS) if first_batches[e] == first_batches[0]]
    if repeats:
        raise RuntimeError(f"data audit failed on rank {rank}: epochs {repeats} start with the same 16 samples as "
                           f"epoch 0 ({first_batches[0][:6]}...); the training order repeats")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
