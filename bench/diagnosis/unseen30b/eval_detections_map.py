import os
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

NUM_VAL = 16
NUM_CLASSES = 3
SCORE_THRESH = 0.5


def load_val_image(idx):
    rng = np.random.default_rng(77 + idx)
    h, w = int(rng.integers(60, 140)), int(rng.integers(60, 140))
    n = 0 if idx >= NUM_VAL // 2 else int(rng.integers(1, 4))
    x1, y1 = rng.uniform(0, w / 2, n), rng.uniform(0, h / 2, n)
    boxes = np.stack([x1, y1, x1 + rng.uniform(10, w / 2, n), y1 + rng.uniform(10, h / 2, n)], 1).reshape(-1, 4)
    return {"id": idx, "size": (h, w), "boxes": torch.tensor(boxes, dtype=torch.float32),
            "labels": torch.tensor(rng.integers(0, NUM_CLASSES, n))}


def run_detector(image):
    g = torch.Generator().manual_seed(image["id"])
    gt = image["boxes"]
    jitter = torch.randn(gt.shape, generator=g) * 3.0
    pos_boxes = gt + jitter
    pos_scores = 0.6 + 0.4 * torch.rand(len(gt), generator=g)
    noise = torch.rand(5, 4, generator=g) * 40
    noise[:, 2:] += noise[:, :2]
    neg_scores = 0.3 * torch.rand(5, generator=g)
    boxes = torch.cat([pos_boxes, noise])
    scores = torch.cat([pos_scores, neg_scores])
    labels = torch.cat([image["labels"], torch.randint(0, NUM_CLASSES, (5,), generator=g)])
    return boxes, scores, labels


def box_iou(a, b):
    lt = torch.max(a[:, None, :2], b[None, :, :2])
    rb = torch.min(a[:, None, 2:], b[None, :, 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    area = lambda x: (x[:, 2] - x[:, 0]) * (x[:, 3] - x[:, 1])
    return inter / (area(a)[:, None] + area(b)[None] - inter)


class DetectionEvaluator:
    def __init__(self):
        self.det_scores, self.det_labels, self.det_tp = [], [], []
        self.num_gt = torch.zeros(NUM_CLASSES, dtype=torch.long)

    def update(self, image, boxes, scores, labels):
        self.num_gt += torch.bincount(image["labels"], minlength=NUM_CLASSES)
        keep = scores >= SCORE_THRESH
        if not keep.any():
            return
        boxes, scores, labels = boxes[keep], scores[keep], labels[keep]
        tp = torch.zeros(len(boxes))
        if len(image["boxes"]):
            iou = box_iou(boxes, image["boxes"])
            same = labels[:, None] == image["labels"][None]
            tp = ((iou >= 0.5) & same).any(1).float()
        self.det_scores.append(scores)
        self.det_labels.append(labels.float())
        self.det_tp.append(tp)

    def gather(self):
        local = torch.stack([torch.cat(self.det_scores), torch.cat(self.det_labels), torch.cat(self.det_tp)], 1)
        world = dist.get_world_size()
        n = torch.tensor([local.shape[0]])
        sizes = [torch.zeros_like(n) for _ in range(world)]
        dist.all_gather(sizes, n)
        max_n = int(max(s.item() for s in sizes))
        padded = torch.zeros(max_n, 3)
        padded[: local.shape[0]] = local
        out = [torch.zeros(max_n, 3) for _ in range(world)]
        dist.all_gather(out, padded)
        dets = torch.cat([o[: int(s)] for o, s in zip(out, sizes)])
        num_gt = self.num_gt.clone()
        dist.all_reduce(num_gt)
        return dets, num_gt

    def compute_map(self, dets, num_gt):
        aps = []
        for c in range(NUM_CLASSES):
            d = dets[dets[:, 1] == c]
            if num_gt[c] == 0:
                continue
            order = d[:, 0].argsort(descending=True)
            tp = d[order, 2]
            ctp = tp.cumsum(0)
            prec = ctp / torch.arange(1, len(tp) + 1)
            aps.append(float((prec * tp).sum() / num_gt[c]))
        return sum(aps) / max(len(aps), 1)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    per_rank = (NUM_VAL + world - 1) // world
    my_ids = range(rank * per_rank, min(NUM_VAL, (rank + 1) * per_rank))
    evaluator = DetectionEvaluator()
    with torch.no_grad():
        for idx in my_ids:
            image = load_val_image(idx)
            evaluator.update(image, *run_detector(image))
    print(f"rank {rank}: evaluated {len(my_ids)} images", flush=True)
    dets, num_gt = evaluator.gather()
    if rank == 0:
        print(f"mAP@0.5 = {evaluator.compute_map(dets, num_gt):.4f} over {int(num_gt.sum())} objects", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
