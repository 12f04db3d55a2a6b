import os
import random
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

SCALES = (64, 80, 96)
NUM_IMAGES = 48
NUM_CLASSES = 4


def make_image(idx):
    rng = np.random.default_rng(1000 + idx)
    h, w = int(rng.integers(48, 120)), int(rng.integers(48, 120))
    img = rng.random((3, h, w), dtype=np.float32)
    n = int(rng.integers(1, 4))
    x1 = rng.uniform(0, w * 0.6, n)
    y1 = rng.uniform(0, h * 0.6, n)
    bw = rng.uniform(8, w * 0.4, n)
    bh = rng.uniform(8, h * 0.4, n)
    boxes = np.stack([x1, y1, np.minimum(x1 + bw, w), np.minimum(y1 + bh, h)], 1)
    labels = rng.integers(0, NUM_CLASSES, n)
    return img, boxes.astype(np.float32), labels


class ShardedDetectionStream(IterableDataset):
    def __init__(self, num_images, epoch=0):
        self.num_images = num_images
        self.epoch = epoch

    def _shard(self):
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank = dist.get_rank() if world > 1 else 0
        info = get_worker_info()
        wid, nw = (info.id, info.num_workers) if info else (0, 1)
        ids = list(range(self.num_images))
        random.Random(self.epoch).shuffle(ids)
        return ids[rank::world][wid::nw]

    def __iter__(self):
        for idx in self._shard():
            img, boxes, labels = make_image(idx)
            if random.random() < 0.5:
                img = img[:, :, ::-1].copy()
                w = img.shape[2]
                boxes = np.stack([w - boxes[:, 2], boxes[:, 1], w - boxes[:, 0], boxes[:, 3]], 1)
            yield torch.from_numpy(img), torch.from_numpy(boxes), torch.from_numpy(labels)


def multiscale_collate(batch):
    size = random.choice(SCALES)
    imgs, targets = [], []
    for img, boxes, labels in batch:
        h, w = img.shape[1:]
        imgs.append(F.interpolate(img[None], size=(size, size), mode="bilinear", align_corners=False)[0])
        scale = torch.tensor([size / w, size / h, size / w, size / h])
        targets.append({"boxes": boxes * scale, "labels": labels})
    return torch.stack(imgs), targets


class TinyDetector(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU(), nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU())
        self.cls_head = nn.Conv2d(32, NUM_CLASSES, 1)
        self.box_head = nn.Conv2d(32, 4, 1)

    def forward(self, x):
        f = self.backbone(x)
        return self.cls_head(f), self.box_head(f)


def detection_loss(cls_out, box_out, targets, size):
    losses = []
    for i, t in enumerate(targets):
        cx = ((t["boxes"][:, 0] + t["boxes"][:, 2]) / 2 / size * cls_out.shape[-1]).long().clamp(0, cls_out.shape[-1] - 1)
        cy = ((t["boxes"][:, 1] + t["boxes"][:, 3]) / 2 / size * cls_out.shape[-2]).long().clamp(0, cls_out.shape[-2] - 1)
        logits = cls_out[i, :, cy, cx].t()
        reg = box_out[i, :, cy, cx].t()
        losses.append(F.cross_entropy(logits, t["labels"]) + F.smooth_l1_loss(reg, t["boxes"] / size))
    return torch.stack(losses).mean()


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(TinyDetector())
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for epoch in range(2):
        loader = DataLoader(ShardedDetectionStream(NUM_IMAGES, epoch), batch_size=4, num_workers=2,
                            collate_fn=multiscale_collate, multiprocessing_context="spawn")
        for step, (imgs, targets) in enumerate(loader):
            cls_out, box_out = model(imgs)
            loss = detection_loss(cls_out, box_out, targets, imgs.shape[-1])
            opt.zero_grad()
            loss.backward()
            opt.step()
            if rank == 0 and step % 2 == 0:
                print(f"epoch {epoch} step {step} size {imgs.shape[-1]} loss {loss.item():.4f}", flush=True)
    dist.barrier()
    if rank == 0:
        print("training done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
