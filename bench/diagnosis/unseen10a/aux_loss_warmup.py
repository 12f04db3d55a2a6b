"""DDP training of a classifier with an auxiliary reconstruction head switched off after warm-up."""
import datetime
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

WARMUP_STEPS = 5


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(20, 64), nn.ReLU())
        self.classifier = nn.Linear(64, 4)
        self.decoder = nn.Linear(64, 20)

    def forward(self, x, with_aux):
        h = self.encoder(x)
        logits = self.classifier(h)
        recon = self.decoder(h) if with_aux else None
        return logits, recon


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(Net(), static_graph=True)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(rank)
    for step in range(20):
        x = torch.randn(32, 20, generator=g)
        y = torch.randint(0, 4, (32,), generator=g)
        with_aux = step < WARMUP_STEPS
        logits, recon = model(x, with_aux)
        loss = nn.functional.cross_entropy(logits, y)
        if with_aux:
            loss = loss + 0.1 * nn.functional.mse_loss(recon, x)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step}: loss {loss.item():.4f}", flush=True)
    print(f"rank {rank}: done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
