"""DDP image-classifier training with DataLoader workers; the workers are started with 'spawn' because forking a
process that already holds the gloo process group's threads and sockets is not safe."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class Synthetic(Dataset):
    def __init__(self, n, seed):
        self.n, self.seed = n, seed

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(self.seed * 100_003 + i)
        x = torch.randn(3, 8, 8, generator=g)
        return x, int(x.mean() > 0)


def make_loader(dataset, shuffle):
    # fork after init_process_group is unsafe: use spawn for the workers
    mp.set_start_method("spawn")
    sampler = DistributedSampler(dataset, shuffle=shuffle, seed=0)
    return DataLoader(dataset, batch_size=64, sampler=sampler, num_workers=1, persistent_workers=True)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(192, 64), torch.nn.ReLU(),
                                    torch.nn.Linear(64, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    train_loader = make_loader(Synthetic(1024, 1), shuffle=True)
    val_loader = None
    for epoch in range(3):
        train_loader.sampler.set_epoch(epoch)
        model.train()
        for x, y in train_loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        if val_loader is None:
            val_loader = make_loader(Synthetic(512, 2), shuffle=False)
        model.eval()
        correct = torch.zeros(2)
        with torch.no_grad():
            for x, y in val_loader:
                correct += torch.tensor([(model(x).argmax(1) == y).sum().item(), len(y)])
        dist.all_reduce(correct)
        if rank == 0:
            print(f"epoch {epoch}: val accuracy {correct[0] / correct[1]:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
