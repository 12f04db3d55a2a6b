import os
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist


def make_val_set(n_images=12, size=64):
    g = torch.Generator().manual_seed(1234)
    items = []
    for i in range(n_images):
        k = int(torch.randint(1, 5, (1,), generator=g))
        xy = torch.rand(k, 2, generator=g) * (size - 16)
        wh = 6 + torch.rand(k, 2, generator=g) * 10
        boxes = torch.cat([xy, xy + wh], dim=1)
        img = torch.rand(3, size, size, generator=g)
        items.append({"image_id": 1000 + i, "image": img, "boxes": boxes})
    return items


class TinyDetector(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.refine = nn.Linear(8, 4)

    def forward(self, image, proposals):
        feat = self.backbone(image[None]).flatten(1)
        delta = torch.tanh(self.refine(feat)) * 2.0
        return proposals + delta, torch.sigmoid(proposals.sum(1) / 100.0)


def box_iou(a, b):
    lt = torch.max(a[:, None, :2], b[None, :, :2])
    rb = torch.min(a[:, None, 2:], b[None, :, 2:])
    inter = (rb - lt).clamp(min=0).prod(2)
    area_a = (a[:, 2:] - a[:, :2]).prod(1)
    area_b = (b[:, 2:] - b[:, :2]).prod(1)
    return inter / (area_a[:, None] + area_b[None, :] - inter)


class BoxEvaluator:
    def __init__(self, iou_thr=0.5):
        self.iou_thr = iou_thr
        self.gts = {}
        self.predictions = []

    def process(self, item, boxes, scores):
        self.gts[item["image_id"]] = item["boxes"]
        self.predictions.append({"image_id": item["image_id"], "boxes": boxes, "scores": scores})

    def evaluate(self):
        world = dist.get_world_size()
        gathered = [None] * world
        dist.all_gather_object(gathered, self.predictions)
        if dist.get_rank() != 0:
            return None
        preds = [p for part in gathered for p in part]
        records, n_gt = [], sum(len(b) for b in self.gts.values())
        for p in preds:
            gt = self.gts[p["image_id"]]
            used = torch.zeros(len(gt), dtype=torch.bool)
            for j in torch.argsort(p["scores"], descending=True).tolist():
                ious = box_iou(p["boxes"][j:j + 1], gt)[0]
                best = int(ious.argmax())
                hit = bool(ious[best] >= self.iou_thr) and not bool(used[best])
                used[best] |= hit
                records.append((float(p["scores"][j]), hit))
        records.sort(key=lambda r: -r[0])
        tp = torch.tensor([r[1] for r in records], dtype=torch.float).cumsum(0)
        prec = tp / torch.arange(1, len(records) + 1)
        return float((prec * torch.tensor([r[1] for r in records], dtype=torch.float)).sum() / max(n_gt, 1))


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = TinyDetector().eval()
    evaluator = BoxEvaluator()
    val = make_val_set()
    g = torch.Generator().manual_seed(99 + rank)
    with torch.no_grad():
        for item in val[rank::world]:
            proposals = item["boxes"] + torch.randn(item["boxes"].shape, generator=g)
            boxes, scores = model(item["image"], proposals)
            evaluator.process(item, boxes, scores)
    result = [evaluator.evaluate()]
    dist.broadcast_object_list(result, src=0)
    print(f"[rank {rank}] AP@0.5 = {result[0]:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
