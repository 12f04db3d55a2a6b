import datetime
import os
import subprocess

import torch
import torch.distributed as dist

N_QUERIES = 1500
N_CLASSES = 50


def score_queries(rank, n):
    g = torch.Generator().manual_seed(1234 + rank)
    logits = torch.randn(n, N_CLASSES, generator=g)
    probs = logits.softmax(-1)
    conf, label = probs.max(-1)
    rows = []
    for i in range(n):
        qid = f"q{rank:02d}-{i:05d}"
        rows.append(f"{conf[i].item():.6f}\t{qid}\tclass_{label[i].item():03d}")
    return rows


def sort_by_confidence(lines):
    proc = subprocess.Popen(
        ["sort", "-t", "\t", "-k1,1gr", "-k2,2"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdin.write("\n".join(lines).encode() + b"\n")
    proc.stdin.close()
    rc = proc.wait()
    out = proc.stdout.read().decode()
    if rc != 0:
        raise RuntimeError(f"sort failed: {proc.stderr.read().decode()}")
    return out.splitlines()


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    rows = score_queries(rank, N_QUERIES)
    gathered = [None] * world if rank == 0 else None
    dist.gather_object(rows, gathered, dst=0)

    hist = torch.zeros(N_CLASSES, dtype=torch.long)
    for r in rows:
        hist[int(r.rsplit("_", 1)[1])] += 1
    dist.all_reduce(hist)

    if rank == 0:
        merged = [line for part in gathered for line in part]
        ranked = sort_by_confidence(merged)
        with open("ranked_predictions.tsv", "w") as f:
            f.write("confidence\tquery\tlabel\n")
            f.write("\n".join(ranked) + "\n")
        top = ranked[0].split("\t")
        print(f"ranked {len(ranked)} predictions; top {top[1]} ({top[0]}); "
              f"most frequent class_{int(hist.argmax()):03d}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
