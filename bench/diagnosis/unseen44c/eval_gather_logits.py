"""Distributed evaluation of a small classifier: every rank scores its slice of the
held-out set, the logits are collected, and rank 0 writes accuracy and a per-class table."""
import datetime
import json
import os

import torch
import torch.distributed as dist
import torch.nn as nn

NUM_CLASSES = 6
FEATURES = 32
TEST_ROWS = 2400
BATCH = 100


def make_test_set(seed=1234):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(NUM_CLASSES, FEATURES, generator=g) * 2.0
    labels = torch.randint(0, NUM_CLASSES, (TEST_ROWS,), generator=g)
    feats = centers[labels] + torch.randn(TEST_ROWS, FEATURES, generator=g)
    return feats, labels


def build_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, NUM_CLASSES))


@torch.no_grad()
def score_shard(model, feats):
    model.eval()
    outs = [model(feats[i:i + BATCH]) for i in range(0, feats.shape[0], BATCH)]
    return torch.cat(outs)


def collect(local, world):
    if world == 1:
        return local.unsqueeze(0)
    out = torch.empty((world,) + tuple(local.shape), dtype=local.dtype)
    dist.all_gather_into_tensor(out, local.contiguous())
    return out


def per_class_report(logits, labels):
    pred = logits.argmax(dim=1)
    rows = {}
    for c in range(NUM_CLASSES):
        tp = int(((pred == c) & (labels == c)).sum())
        fp = int(((pred == c) & (labels != c)).sum())
        fn = int(((pred != c) & (labels == c)).sum())
        prec = tp / (tp + fp) if tp + fp else 0.0
        rec = tp / (tp + fn) if tp + fn else 0.0
        rows[c] = {"precision": round(prec, 4), "recall": round(rec, 4), "support": tp + fn}
    return rows


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    feats, labels = make_test_set()
    per_rank = TEST_ROWS // world
    lo, hi = rank * per_rank, (rank + 1) * per_rank
    model = build_model()

    local_logits = score_shard(model, feats[lo:hi])
    print(f"[rank {rank}] scored rows {lo}:{hi}", flush=True)
    stacked = collect(local_logits, world)
    all_logits = stacked.reshape(-1, NUM_CLASSES)

    if rank == 0:
        gold = labels[: all_logits.shape[0]]
        acc = (all_logits.argmax(1) == gold).float().mean().item()
        report = {"accuracy": round(acc, 4), "rows": int(all_logits.shape[0]),
                  "per_class": per_class_report(all_logits, gold)}
        with open("eval_report.json", "w") as f:
            json.dump(report, f, indent=2)
        print(json.dumps({"accuracy": report["accuracy"], "rows": report["rows"]}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
