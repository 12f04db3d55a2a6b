"""Transfer learning across 2 nodes: a pretrained feature extractor gets a new 3-class head, then DDP fine-tunes.
The script checks at the end that the fine-tuned model separates the 3 classes."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(16, 48), nn.ReLU(), nn.Linear(48, 48), nn.ReLU())
        self.fc = nn.Linear(48, 10)          # the "pretrained" 10-class head

    def forward(self, x):
        return self.fc(self.features(x))


def make_data(rank, n=512):
    gen = torch.Generator().manual_seed(7 + rank)
    y = torch.randint(0, 3, (n,), generator=gen)
    centers = torch.tensor([[2.0] * 8 + [0.0] * 8, [0.0] * 8 + [2.0] * 8, [-2.0] * 16])
    return centers[y] + 0.3 * torch.randn(n, 16, generator=gen), y


def build(cfg):
    torch.manual_seed(0)
    model = Backbone()
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg["lr"], momentum=0.9)
    for p in model.features.parameters():      # freeze the pretrained features
        p.requires_grad_(False)
    model.fc = nn.Linear(48, cfg["num_classes"])  # new head for our task
    return model, optimizer


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    cfg = {"lr": 0.1, "num_classes": 3, "epochs": 6}
    model, optimizer = build(cfg)
    ddp = DDP(model)
    x, y = make_data(rank)
    for epoch in range(cfg["epochs"]):
        for i in range(0, len(x), 64):
            loss = nn.functional.cross_entropy(ddp(x[i:i + 64]), y[i:i + 64])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.3f}", flush=True)
    with torch.no_grad():
        correct = torch.tensor([(model(x).argmax(1) == y).sum().item(), len(y)], dtype=torch.float64)
    dist.all_reduce(correct)
    acc = (correct[0] / correct[1]).item()
    if rank == 0:
        print(f"fine-tuned accuracy {acc:.3f}", flush=True)
    dist.destroy_process_group()
    if acc < 0.9:
        raise SystemExit(f"fine-tuning check failed: accuracy {acc:.3f} after {cfg['epochs']} epochs "
                         f"(last loss {loss.item():.3f}); expected >= 0.90")


if __name__ == "__main__":
    main()
