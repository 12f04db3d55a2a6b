import datetime
import json
import os

import torch
import torch.distributed as dist
import torch.nn as nn

N_EXAMPLES = 400


def build_model():
    torch.manual_seed(7)
    return nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4)).eval()


def load_split():
    g = torch.Generator().manual_seed(99)
    feats = torch.randn(N_EXAMPLES, 16, generator=g)
    labels = torch.randint(0, 4, (N_EXAMPLES,), generator=g)
    return feats, labels


def predict_shard(model, feats, labels, rank, world):
    per = (len(feats) + world - 1) // world
    lo, hi = rank * per, min(len(feats), (rank + 1) * per)
    out = []
    with torch.no_grad():
        probs = model(feats[lo:hi]).softmax(-1)
    for idx, (p, y) in enumerate(zip(probs, labels[lo:hi])):
        out.append({"id": idx, "pred": int(p.argmax()), "conf": round(float(p.max()), 5), "label": int(y)})
    return out


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    model = build_model()
    feats, labels = load_split()
    records = predict_shard(model, feats, labels, rank, world)
    gathered = [None] * world
    dist.all_gather_object(gathered, records)
    if rank == 0:
        by_id = {}
        for part in gathered:
            for rec in part:
                by_id[rec["id"]] = rec
        missing = [i for i in range(N_EXAMPLES) if i not in by_id]
        if missing:
            raise RuntimeError(f"prediction merge incomplete: {len(missing)} of {N_EXAMPLES} ids missing "
                               f"(first {missing[:5]})")
        acc = sum(r["pred"] == r["label"] for r in by_id.values()) / N_EXAMPLES
        with open("predictions.jsonl", "w") as f:
            for i in range(N_EXAMPLES):
                f.write(json.dumps(by_id[i]) + "\n")
        print(f"wrote {N_EXAMPLES} predictions, accuracy {acc:.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
