import os
import socket
import datetime
import torch
import torch.distributed as dist
import torch.nn as nn

NUM_CLASSES = 5
NUM_SAMPLES = 2048
FEATURES = 16


def build_eval_set():
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(NUM_SAMPLES, FEATURES, generator=g)
    proto = torch.randn(NUM_CLASSES, FEATURES, generator=g)
    y = (x @ proto.t()).argmax(dim=1)
    return x, y


def build_model():
    torch.manual_seed(7)
    return nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, NUM_CLASSES))


def shard(n, rank, world):
    per = (n + world - 1) // world
    start = rank * per
    return start, min(n, start + per)


@torch.no_grad()
def evaluate(model, x, y):
    model.eval()
    cm = torch.zeros(NUM_CLASSES, NUM_CLASSES, dtype=torch.long)
    for i in range(0, x.shape[0], 128):
        pred = model(x[i:i + 128]).argmax(dim=1)
        idx = y[i:i + 128] * NUM_CLASSES + pred
        cm += torch.bincount(idx, minlength=NUM_CLASSES * NUM_CLASSES).view(NUM_CLASSES, NUM_CLASSES)
    return cm


def summarize(cm):
    tp = cm.diag().double()
    precision = tp / cm.sum(0).clamp(min=1)
    recall = tp / cm.sum(1).clamp(min=1)
    f1 = 2 * precision * recall / (precision + recall).clamp(min=1e-12)
    return {
        "accuracy": float(tp.sum() / cm.sum().clamp(min=1)),
        "macro_f1": float(f1.mean()),
        "per_class_recall": [round(float(r), 4) for r in recall],
    }


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    x, y = build_eval_set()
    model = build_model()
    start, end = shard(NUM_SAMPLES, rank, world)
    cm = evaluate(model, x[start:end], y[start:end])

    part = {
        "worker": socket.gethostname(),
        "rank": rank,
        "samples": end - start,
        "confusion": cm.tolist(),
    }
    parts = [None] * world
    dist.all_gather_object(parts, part)

    if rank == 0:
        by_worker = {}
        for p in parts:
            by_worker[p["worker"]] = p
        total = sum(p["samples"] for p in by_worker.values())
        if total != NUM_SAMPLES:
            raise RuntimeError(
                f"evaluation report covers {total} of {NUM_SAMPLES} samples "
                f"({len(by_worker)} parts); refusing to publish partial metrics")
        merged = sum(torch.tensor(p["confusion"]) for p in by_worker.values())
        report = summarize(merged)
        print("eval report:", report, flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
