import os
import datetime
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

GRID_COLS = 4
TILE = 32
STRIDE = 8


class AerialTiles(Dataset):
    def __init__(self, rows=6):
        self.rows = rows
        self.g = torch.Generator().manual_seed(5)
        self.items = [self._make(i) for i in range(rows * GRID_COLS)]

    def _make(self, idx):
        col = idx % GRID_COLS
        img = torch.rand(3, TILE, TILE, generator=self.g) * 0.3
        boxes = torch.zeros(0, 4)
        if col < GRID_COLS - 1:
            n = int(torch.randint(1, 4, (1,), generator=self.g))
            xy = torch.randint(0, TILE - 8, (n, 2), generator=self.g).float()
            boxes = torch.cat([xy, xy + 6], 1)
            for x0, y0, x1, y1 in boxes.long().tolist():
                img[:, y0:y1, x0:x1] += 0.6
        return img, boxes

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def collate(batch):
    return torch.stack([b[0] for b in batch]), [b[1] for b in batch]


class PointDetector(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
                                  nn.Conv2d(16, 16, 3, stride=2, padding=1), nn.ReLU(),
                                  nn.Conv2d(16, 16, 3, stride=2, padding=1), nn.ReLU())
        self.cls = nn.Conv2d(16, 1, 1)
        self.reg = nn.Conv2d(16, 4, 1)

    def forward(self, x):
        f = self.stem(x)
        return self.cls(f), self.reg(f)


def anchor_centers(h, w):
    ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    return torch.stack([xs, ys], -1).reshape(-1, 2).float() * STRIDE + STRIDE / 2


def detection_loss(cls_out, reg_out, targets):
    h, w = cls_out.shape[-2:]
    centers = anchor_centers(h, w)
    losses = []
    for i, boxes in enumerate(targets):
        if boxes.numel() == 0:
            continue
        cxy = (boxes[:, :2] + boxes[:, 2:]) / 2
        owner = torch.cdist(centers, cxy).argmin(0)
        labels = torch.zeros(h * w)
        labels[owner] = 1.0
        cls_i = cls_out[i].reshape(-1)
        reg_i = reg_out[i].reshape(4, -1).t()[owner]
        l_cls = F.binary_cross_entropy_with_logits(cls_i, labels)
        l_reg = F.smooth_l1_loss(reg_i, (boxes - centers[owner].repeat(1, 2)) / STRIDE)
        losses.append(l_cls + l_reg)
    return sum(losses)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(PointDetector())
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    ds = AerialTiles()
    sampler = DistributedSampler(ds, shuffle=False)
    loader = DataLoader(ds, batch_size=2, sampler=sampler, collate_fn=collate)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for step, (images, targets) in enumerate(loader):
            cls_out, reg_out = model(images)
            loss = detection_loss(cls_out, reg_out, targets)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if rank == 0 and step % 2 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
