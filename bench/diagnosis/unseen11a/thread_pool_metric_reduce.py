"""Evaluate several metrics at once in a thread pool; each metric is summed over the ranks when ready."""
import os
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from datetime import timedelta

import torch
import torch.distributed as dist

NUM_CLASSES = 16


def accuracy(preds, labels):
    time.sleep(0.02 * len(labels) / 100)  # stands in for the per-sample work
    return torch.tensor([float((preds == labels).sum()), float(len(labels))])


def confusion(preds, labels):
    time.sleep(0.5)
    m = torch.zeros(NUM_CLASSES, NUM_CLASSES)
    m.index_put_((labels, preds), torch.ones(len(labels)), accumulate=True)
    return m


def reduced(name, fn, preds, labels):
    value = fn(preds, labels)
    dist.all_reduce(value)
    return name, value


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    gen = torch.Generator().manual_seed(rank)
    n = 1000 if rank == 0 else 4000  # the last rank holds the long tail of the validation set
    labels = torch.randint(0, NUM_CLASSES, (n,), generator=gen)
    preds = torch.where(torch.rand(n, generator=gen) < 0.7, labels, torch.randint(0, NUM_CLASSES, (n,), generator=gen))
    results = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(reduced, "accuracy", accuracy, preds, labels),
                   pool.submit(reduced, "confusion", confusion, preds, labels)]
        for f in as_completed(futures):
            name, value = f.result()
            results[name] = value
    acc = results["accuracy"]
    print(f"rank {rank}: accuracy {acc[0] / acc[1]:.3f}, confusion total {results['confusion'].sum():.0f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
