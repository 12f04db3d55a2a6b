"""Intent classifier on bag-of-words features, trained with DDP (torchrun, gloo, CPU)."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

CONFIG = {
    "vocab": 300,
    "classes": 6,
    "hidden": 64,
    "batch_size": 32,
    "shuffle": True,
    "epochs": 3,
    "lr": 0.05,
}


def make_corpus(n=2048, seed=7):
    g = torch.Generator().manual_seed(seed)
    x = (torch.rand(n, CONFIG["vocab"], generator=g) < 0.05).float()
    w = torch.randn(CONFIG["vocab"], CONFIG["classes"], generator=g)
    y = (x @ w).argmax(dim=1)
    return TensorDataset(x, y)


def make_loader(dataset, cfg, distributed):
    sampler = DistributedSampler(dataset) if distributed else None
    loader = DataLoader(dataset, batch_size=cfg["batch_size"], shuffle=cfg["shuffle"], sampler=sampler,
                        drop_last=True)
    return loader, sampler


class Classifier(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(cfg["vocab"], cfg["hidden"]), nn.ReLU(),
                                 nn.Linear(cfg["hidden"], cfg["classes"]))

    def forward(self, x):
        return self.net(x)


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(Classifier(CONFIG))
    opt = torch.optim.SGD(model.parameters(), lr=CONFIG["lr"])
    loss_fn = nn.CrossEntropyLoss()
    loader, sampler = make_loader(make_corpus(), CONFIG, distributed=world > 1)
    for epoch in range(CONFIG["epochs"]):
        if sampler is not None:
            sampler.set_epoch(epoch)
        total = torch.zeros(2)
        for x, y in loader:
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            total += torch.tensor([loss.item() * len(y), len(y)])
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch}: loss {total[0] / total[1]:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
