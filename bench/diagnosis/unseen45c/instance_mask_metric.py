import os
import datetime
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist


def make_val_images(n=8, size=48):
    g = torch.Generator().manual_seed(21)
    images = []
    for i in range(n):
        img = torch.rand(1, size, size, generator=g) * 0.3
        masks = []
        if i % 4 != 3:
            for _ in range(int(torch.randint(1, 4, (1,), generator=g))):
                x, y = torch.randint(0, size - 12, (2,), generator=g).tolist()
                m = torch.zeros(size, size, dtype=torch.bool)
                m[y:y + 10, x:x + 10] = True
                img[0][m] += 0.7
                masks.append(m)
        gt = torch.stack(masks) if masks else torch.zeros(0, size, size, dtype=torch.bool)
        images.append({"image": img, "gt_masks": gt})
    return images


class MaskHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 1, 3, padding=1)
        with torch.no_grad():
            self.conv.weight.fill_(1.0 / 9)
            self.conv.bias.fill_(-0.6)

    def forward(self, img):
        return torch.sigmoid(self.conv(img[None]))[0, 0]


def split_instances(fg):
    ys, xs = torch.nonzero(fg, as_tuple=True)
    if len(ys) == 0:
        return torch.zeros(0, *fg.shape, dtype=torch.bool)
    return fg[None]


class MaskIoUMetric:
    def __init__(self):
        self.state = {"ious": [], "areas": []}

    def update(self, pred_masks, gt_masks):
        if pred_masks.shape[0] == 0 or gt_masks.shape[0] == 0:
            return
        inter = (pred_masks[:, None] & gt_masks[None]).flatten(2).sum(-1).float()
        union = (pred_masks[:, None] | gt_masks[None]).flatten(2).sum(-1).float()
        self.state["ious"].append((inter / union.clamp(min=1)).max(1).values)
        self.state["areas"].append(pred_masks.flatten(1).sum(1).float())

    @staticmethod
    def _gather_padded(t):
        world = dist.get_world_size()
        n = torch.tensor([t.numel()])
        sizes = [torch.zeros_like(n) for _ in range(world)]
        dist.all_gather(sizes, n)
        top = int(max(s.item() for s in sizes))
        buf = F.pad(t, (0, top - t.numel()))
        out = [torch.zeros_like(buf) for _ in range(world)]
        dist.all_gather(out, buf)
        return [o[: int(s)] for o, s in zip(out, sizes)]

    def compute(self):
        synced = {}
        for name, values in self.state.items():
            synced[name] = [part for v in values for part in self._gather_padded(v)]
        ious = torch.cat(synced["ious"]) if synced["ious"] else torch.zeros(0)
        return {"mask_mIoU": ious.mean().item() if ious.numel() else 0.0, "instances": ious.numel()}


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    head = MaskHead().eval()
    metric = MaskIoUMetric()
    with torch.no_grad():
        for item in make_val_images()[rank::world]:
            prob = head(item["image"])
            metric.update(split_instances(prob > 0.5), item["gt_masks"])
    result = metric.compute()
    if rank == 0:
        print(f"validation: {result}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
