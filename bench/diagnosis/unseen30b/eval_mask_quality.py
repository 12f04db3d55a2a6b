import os
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

NUM_VAL = 12


def load_sample(idx):
    rng = np.random.default_rng(500 + idx)
    h, w = int(rng.integers(24, 64)), int(rng.integers(24, 64))
    yy, xx = np.mgrid[0:h, 0:w]
    cy, cx = rng.uniform(h * 0.3, h * 0.7), rng.uniform(w * 0.3, w * 0.7)
    r = rng.uniform(min(h, w) * 0.15, min(h, w) * 0.35)
    gt = ((yy - cy) ** 2 + (xx - cx) ** 2 <= r ** 2).astype(np.float32)
    image = rng.random((3, h, w)).astype(np.float32) * 0.3 + gt[None] * 0.7
    return torch.from_numpy(image), torch.from_numpy(gt)


def predict_mask(image):
    prob = image.mean(0, keepdim=True)[None]
    prob = F.avg_pool2d(prob, 3, stride=1, padding=1, count_include_pad=False)[0, 0]
    return (prob > 0.45).float()


def boundary(mask, width=1):
    m = mask[None, None]
    eroded = -F.max_pool2d(-m, 2 * width + 1, stride=1, padding=width)
    return (m - eroded)[0, 0] > 0


def mask_metrics(pred, gt):
    inter = (pred * gt).sum()
    union = ((pred + gt) > 0).float().sum()
    bp, bg = boundary(pred), boundary(gt)
    b_inter = (bp & bg).sum().float()
    b_union = (bp | bg).sum().float().clamp(min=1)
    return float(inter / union.clamp(min=1)), float(b_inter / b_union)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    preds, gts = [], []
    for idx in range(rank, NUM_VAL, world):
        image, gt = load_sample(idx)
        preds.append(predict_mask(image))
        gts.append(gt)
    local_iou = [mask_metrics(p, g)[0] for p, g in zip(preds, gts)]
    print(f"rank {rank}: {len(preds)} masks, local mIoU {np.mean(local_iou):.3f}", flush=True)

    pred_nt = torch.nested.nested_tensor(preds)
    gt_nt = torch.nested.nested_tensor(gts)
    gathered_pred = [torch.nested.nested_tensor([torch.zeros_like(p) for p in preds]) for _ in range(world)]
    gathered_gt = [torch.nested.nested_tensor([torch.zeros_like(g) for g in gts]) for _ in range(world)]
    dist.all_gather(gathered_pred, pred_nt)
    dist.all_gather(gathered_gt, gt_nt)

    if rank == 0:
        ious, bious = [], []
        for pn, gn in zip(gathered_pred, gathered_gt):
            for p, g in zip(pn.unbind(), gn.unbind()):
                iou, biou = mask_metrics(p, g)
                ious.append(iou)
                bious.append(biou)
        print(f"mask mIoU {np.mean(ious):.4f}  boundary IoU {np.mean(bious):.4f}  over {len(ious)} masks", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
