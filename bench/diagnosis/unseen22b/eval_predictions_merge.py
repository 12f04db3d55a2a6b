"""Sharded evaluation: every rank scores its part of the eval set and streams its predictions to a JSONL
file; rank 0 merges the files into one report with accuracy and calibration numbers."""
import datetime
import json
import os

import torch
import torch.distributed as dist
import torch.nn as nn

N_EVAL = 4000
N_CLASSES = 10
OUT_DIR = "eval_out"


def eval_set():
    g = torch.Generator().manual_seed(7)
    x = torch.randn(N_EVAL, 32, generator=g)
    y = (x[:, :N_CLASSES] + 0.3 * torch.randn(N_EVAL, N_CLASSES, generator=g)).argmax(dim=1)
    return x, y


def build_model():
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, N_CLASSES))
    with torch.no_grad():
        model[0].weight[:N_CLASSES, :N_CLASSES] += 4 * torch.eye(N_CLASSES)
    return model.eval()


class PredictionWriter:
    def __init__(self, rank):
        os.makedirs(OUT_DIR, exist_ok=True)
        self.path = os.path.join(OUT_DIR, f"preds_rank{rank}.jsonl")
        self.fh = open(self.path, "w")
        self.records = []

    def write(self, idx, probs, label):
        conf, pred = probs.max(dim=0)
        rec = {"id": int(idx), "pred": int(pred), "label": int(label), "conf": round(float(conf), 5)}
        self.records.append(rec)
        self.fh.write(json.dumps(rec) + "\n")

    def close(self):
        self.fh.close()


def report(records):
    assert len(records) == N_EVAL, f"expected {N_EVAL} predictions, merged {len(records)}"
    acc = sum(r["pred"] == r["label"] for r in records) / len(records)
    bins = [[] for _ in range(10)]
    for r in records:
        bins[min(int(r["conf"] * 10), 9)].append(r)
    ece = sum(abs(sum(r["pred"] == r["label"] for r in b) / len(b) - sum(r["conf"] for r in b) / len(b)) * len(b)
              for b in bins if b) / len(records)
    return {"n": len(records), "accuracy": round(acc, 4), "ece": round(ece, 4)}


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    x, y = eval_set()
    model = build_model()
    writer = PredictionWriter(rank)

    ids = torch.arange(rank, N_EVAL, world)
    with torch.no_grad():
        for chunk in ids.split(256):
            probs = model(x[chunk]).softmax(dim=1)
            for i, p in zip(chunk.tolist(), probs):
                writer.write(i, p, y[i])
    print(f"rank {rank}: scored {len(ids)} examples", flush=True)

    dist.barrier()
    if rank == 0:
        merged = list(writer.records)
        for r in range(1, world):
            with open(os.path.join(OUT_DIR, f"preds_rank{r}.jsonl")) as f:
                merged.extend(json.loads(line) for line in f)
        summary = report(sorted(merged, key=lambda r: r["id"]))
        with open(os.path.join(OUT_DIR, "summary.json"), "w") as f:
            json.dump(summary, f)
        print("eval summary:", summary, flush=True)
    dist.barrier()
    dist.destroy_process_group()
    writer.close()


if __name__ == "__main__":
    main()
