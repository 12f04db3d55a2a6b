import os
import datetime
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

BASE_RES = 64
SCALES = [1.0, 0.75, 1.25, 0.5]
NUM_CLASSES = 10
BATCH = 8


class SmallNet(nn.Module):
    def __init__(self, res=BASE_RES):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, 32, 3, stride=2, padding=1), nn.ReLU(),
        )
        fmap = res // 8
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(32 * fmap * fmap, 128), nn.ReLU(),
                                        nn.Linear(128, NUM_CLASSES))

    def forward(self, x):
        return self.classifier(self.features(x))


def rank_resolution(rank):
    res = int(BASE_RES * SCALES[rank % len(SCALES)])
    return max(32, res - res % 8)


def make_batch(res, gen):
    x = torch.rand(BATCH, 3, BASE_RES, BASE_RES, generator=gen)
    y = torch.randint(0, NUM_CLASSES, (BATCH,), generator=gen)
    if res != BASE_RES:
        x = F.interpolate(x, size=(res, res), mode="bilinear", align_corners=False)
    return x, y


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(SmallNet())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    res = rank_resolution(rank)
    print(f"[rank {rank}] training at {res}x{res}", flush=True)
    gen = torch.Generator().manual_seed(7 + rank)
    for epoch in range(2):
        total = torch.zeros(2)
        for step in range(10):
            x, y = make_batch(res, gen)
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += torch.tensor([loss.item() * BATCH, BATCH])
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch} mean loss {total[0] / total[1]:.4f}", flush=True)
    if rank == 0:
        torch.save(model.module.state_dict(), "multiscale_cls.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
