import os
import datetime
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

GLOBAL_BATCH = 6
NUM_CLASSES = 5
MIN_BN_BATCH = 2


def conv_bn(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())


class TinySeg(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc1 = conv_bn(3, 16)
        self.enc2 = conv_bn(16, 32)
        self.dec = conv_bn(48, 16)
        self.head = nn.Conv2d(16, NUM_CLASSES, 1)

    def forward(self, x):
        a = self.enc1(x)
        b = self.enc2(F.max_pool2d(a, 2))
        up = F.interpolate(b, size=a.shape[-2:], mode="bilinear", align_corners=False)
        return self.head(self.dec(torch.cat([a, up], 1)))


def freeze_norm(model):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.eval()
            for p in m.parameters():
                p.requires_grad_(False)


def local_batch_size(rank, world):
    base, extra = divmod(GLOBAL_BATCH, world)
    return base + (1 if rank < extra else 0)


def synthetic_batch(n, gen):
    img = torch.rand(n, 3, 32, 32, generator=gen)
    mask = (img.mean(1) * NUM_CLASSES).long().clamp(max=NUM_CLASSES - 1)
    return img, mask


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    bs = local_batch_size(rank, world)
    model = TinySeg()
    if bs < MIN_BN_BATCH:
        freeze_norm(model)
        print(f"[rank {rank}] per-rank batch {bs}: using frozen BN statistics", flush=True)
    model = DDP(model)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(100 + rank)
    for step in range(20):
        img, mask = synthetic_batch(bs, gen)
        loss = F.cross_entropy(model(img), mask)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 5 == 0:
            t = loss.detach().clone()
            dist.all_reduce(t)
            if rank == 0:
                print(f"step {step} loss {t.item() / world:.4f}", flush=True)
    dist.barrier()
    if rank == 0:
        torch.save(model.module.state_dict(), "seg_tiny.pt")
        print("done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
