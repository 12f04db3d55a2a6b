import os
import math
import datetime
import torch
import torch.distributed as dist

IGNORE_INDEX = -100
NUM_CLASSES = 10
SAMPLES_PER_SITE = 1000


def load_site_predictions(rank):
    g = torch.Generator().manual_seed(2024 + rank)
    logits = torch.randn(SAMPLES_PER_SITE, NUM_CLASSES, generator=g) * 2.5
    labels = torch.randint(0, NUM_CLASSES, (SAMPLES_PER_SITE,), generator=g)
    agree = torch.rand(SAMPLES_PER_SITE, generator=g) < 0.6
    labels = torch.where(agree, logits.argmax(dim=1), labels)
    unlabeled_fraction = 0.15 + 0.35 * (rank % 2)
    unlabeled = torch.rand(SAMPLES_PER_SITE, generator=g) < unlabeled_fraction
    labels[unlabeled] = IGNORE_INDEX
    return logits, labels


def bin_statistics(confidence, correct, n_bins):
    edges = torch.linspace(0.0, 1.0, n_bins + 1, dtype=torch.float64)
    idx = torch.bucketize(confidence, edges[1:-1], right=False)
    counts = torch.zeros(n_bins, dtype=torch.float64)
    conf_sum = torch.zeros(n_bins, dtype=torch.float64)
    acc_sum = torch.zeros(n_bins, dtype=torch.float64)
    counts.index_add_(0, idx, torch.ones_like(confidence))
    conf_sum.index_add_(0, idx, confidence)
    acc_sum.index_add_(0, idx, correct)
    return counts, conf_sum, acc_sum


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    logits, labels = load_site_predictions(rank)
    valid = labels != IGNORE_INDEX
    probs = torch.softmax(logits[valid].double(), dim=1)
    confidence, pred = probs.max(dim=1)
    correct = (pred == labels[valid]).double()

    n_valid = int(valid.sum())
    n_bins = max(10, int(math.sqrt(n_valid)))
    counts, conf_sum, acc_sum = bin_statistics(confidence, correct, n_bins)

    stats = torch.stack([counts, conf_sum, acc_sum])
    dist.all_reduce(stats)
    counts, conf_sum, acc_sum = stats

    nonempty = counts > 0
    gap = (conf_sum[nonempty] / counts[nonempty] - acc_sum[nonempty] / counts[nonempty]).abs()
    ece = float((counts[nonempty] / counts.sum() * gap).sum())
    mce = float(gap.max())
    if rank == 0:
        print(f"calibration over {int(counts.sum())} labeled predictions, {n_bins} bins: "
              f"ECE={ece:.4f} MCE={mce:.4f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
