import os
import datetime

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

NUM_CLASSES = 4
IMAGE = 32


def conv_bn(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class TinyUNet(nn.Module):
    def __init__(self, width=16):
        super().__init__()
        self.enc1 = conv_bn(3, width)
        self.enc2 = conv_bn(width, width * 2)
        self.mid = conv_bn(width * 2, width * 2)
        self.dec = conv_bn(width * 3, width)
        self.head = nn.Conv2d(width, NUM_CLASSES, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        m = self.mid(e2)
        up = F.interpolate(m, scale_factor=2, mode="bilinear", align_corners=False)
        return self.head(self.dec(torch.cat([up, e1], dim=1)))


def synthetic_tiles(n, seed):
    g = torch.Generator().manual_seed(seed)
    images = torch.rand(n, 3, IMAGE, IMAGE, generator=g)
    masks = (images.mean(1) * NUM_CLASSES).long().clamp_(max=NUM_CLASSES - 1)
    return images, masks


def mean_iou(logits, masks):
    pred = logits.argmax(1)
    inter = torch.zeros(NUM_CLASSES)
    union = torch.zeros(NUM_CLASSES)
    for c in range(NUM_CLASSES):
        inter[c] = ((pred == c) & (masks == c)).sum()
        union[c] = ((pred == c) | (masks == c)).sum()
    return inter, union


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")

    torch.manual_seed(0)
    model = TinyUNet()
    if world > 1:
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    model = model.to(device)
    model = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)

    images, masks = synthetic_tiles(256, seed=rank)
    val_images, val_masks = synthetic_tiles(64, seed=100 + rank)
    for epoch in range(3):
        model.train()
        for i in range(0, len(images), 8):
            x, y = images[i:i + 8].to(device), masks[i:i + 8].to(device)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            inter, union = mean_iou(model(val_images.to(device)).cpu(), val_masks)
        stats = torch.stack([inter, union])
        dist.all_reduce(stats)
        miou = (stats[0] / stats[1].clamp(min=1)).mean().item()
        if rank == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f} val mIoU {miou:.3f}", flush=True)

    if rank == 0:
        torch.save(model.module.state_dict(), "road_segmenter.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
