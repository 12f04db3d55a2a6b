"""Post-hoc calibration: fit a single temperature on the held-out logits of every rank
with L-BFGS, then report the expected calibration error."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn.functional as F


def init():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


def heldout_logits(rank, n=3000, classes=10):
    g = torch.Generator().manual_seed(100 + rank)
    labels = torch.randint(0, classes, (n,), generator=g)
    logits = torch.randn(n, classes, generator=g) * (1.5 + rank)
    logits[torch.arange(n), labels] += 2.0 + 1.5 * rank
    return logits, labels


def fit_temperature(logits, labels, world_size):
    log_t = torch.zeros(1, requires_grad=True)
    opt = torch.optim.LBFGS([log_t], lr=0.5, max_iter=100, tolerance_change=1e-6,
                            line_search_fn="strong_wolfe")
    evals = [0]

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(logits / log_t.exp(), labels)
        loss.backward()
        dist.all_reduce(log_t.grad)
        log_t.grad.div_(world_size)
        evals[0] += 1
        return loss

    opt.step(closure)
    return log_t.detach().exp(), evals[0]


def calibration_bins(logits, labels, temperature, n_bins=15):
    probs = F.softmax(logits / temperature, dim=1)
    conf, pred = probs.max(dim=1)
    correct = (pred == labels).float()
    idx = torch.clamp((conf * n_bins).long(), max=n_bins - 1)
    stats = torch.zeros(3, n_bins)
    stats[0].index_add_(0, idx, torch.ones_like(conf))
    stats[1].index_add_(0, idx, conf)
    stats[2].index_add_(0, idx, correct)
    return stats


def main():
    rank, world_size = init()
    logits, labels = heldout_logits(rank)
    temperature, evals = fit_temperature(logits, labels, world_size)
    print(f"rank {rank}: temperature {temperature.item():.4f} after {evals} evaluations", flush=True)
    stats = calibration_bins(logits, labels, temperature)
    dist.all_reduce(stats)
    count, conf_sum, acc_sum = stats
    nz = count > 0
    ece = ((conf_sum[nz] - acc_sum[nz]).abs().sum() / count.sum()).item()
    if rank == 0:
        print(f"ECE after temperature scaling: {ece:.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
