import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

IMG = 32
CROP_STRENGTHS = (0.0, 1.0)


def crop_view(x, strength, offset):
    size = int(IMG * (1 - strength * 0.9999))
    top = min(offset, IMG - size)
    patch = x[..., top:top + size, top:top + size]
    return F.interpolate(patch, size=(IMG, IMG), mode="bilinear", align_corners=False)


def build_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1),
                         nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10)).eval()


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    strength = torch.linspace(*CROP_STRENGTHS, world)[rank].item() if world > 1 else CROP_STRENGTHS[0]
    model = build_model()
    g = torch.Generator().manual_seed(123)
    images = torch.randn(64, 3, IMG, IMG, generator=g)
    labels = torch.randint(0, 10, (64,), generator=g)
    print(f"rank {rank}/{world}: TTA crop strength {strength:.3f}", flush=True)

    probs = torch.zeros(64, 10)
    with torch.no_grad():
        for offset in (0, 4, 8):
            for flip in (False, True):
                x = images.flip(-1) if flip else images
                probs += model(crop_view(x, strength, offset)).softmax(dim=1)
    probs /= 6
    dist.all_reduce(probs, op=dist.ReduceOp.SUM)
    probs /= world
    acc = (probs.argmax(1) == labels).float().mean().item()
    if rank == 0:
        print(f"TTA ensemble over {world} ranks: top-1 {acc:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
