"""Fine-tune a small patch classifier with DDP, a DataLoader of 2 workers per rank (CPU, gloo).

The team's run script keeps every temporary file of a job under the experiment's own scratch folder, because the
nodes' /tmp is small and shared by other jobs:

    EXP=vit_tiny_patch16_224.augreg_in21k_ft_cifar100-lr3e-4-bs32
    export TMPDIR=$PWD/.scratch/$EXP/$(hostname)/tmp && mkdir -p $TMPDIR
    torchrun --nnodes 2 --node-rank N --master-addr ... scratch_tmpdir_loader.py
"""
import datetime
import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class Patches(Dataset):
    """512 random 3x16x16 'images' with 10 classes, flipped at random as augmentation."""

    def __init__(self, n=512):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 3, 16, 16, generator=g)
        self.y = torch.randint(0, 10, (n,), generator=g)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        x = self.x[i]
        if torch.rand(()) < 0.5:
            x = x.flip(-1)
        return x, self.y[i]


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(768, 64), torch.nn.ReLU(),
                                    torch.nn.Linear(64, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    data = Patches()
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=32, sampler=sampler, num_workers=2)
    print(f"rank {rank}/{world}: {len(loader)} batches per epoch, scratch {tempfile.gettempdir()}", flush=True)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        total, seen = 0.0, 0
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(y)
            seen += len(y)
        print(f"rank {rank}: epoch {epoch} loss {total / seen:.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
