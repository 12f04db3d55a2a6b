import os
import math
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def shard(rank, n=2048):
    g = torch.Generator().manual_seed(11 + rank)
    x = torch.randn(n, 20, generator=g) * (1.0 + 3.0 * rank)
    w = torch.randn(20, 1, generator=torch.Generator().manual_seed(3))
    return x, x @ w + 0.05 * torch.randn(n, 1, generator=g)


class LRFinder:
    def __init__(self, model, opt, loss_fn, start_lr=1e-6, end_lr=1.0, num_iter=60, beta=0.9, diverge=4.0):
        self.model, self.opt, self.loss_fn = model, opt, loss_fn
        self.start_lr, self.end_lr, self.num_iter = start_lr, end_lr, num_iter
        self.beta, self.diverge = beta, diverge
        self.init_state = {k: v.clone() for k, v in model.state_dict().items()}

    def run(self, x, y, bs=64):
        lrs, losses, avg, best = [], [], 0.0, math.inf
        gamma = (self.end_lr / self.start_lr) ** (1 / self.num_iter)
        lr = self.start_lr
        for it in range(self.num_iter):
            i = (it * bs) % (len(x) - bs)
            for group in self.opt.param_groups:
                group["lr"] = lr
            self.opt.zero_grad()
            loss = self.loss_fn(self.model(x[i:i + bs]), y[i:i + bs])
            loss.backward()
            self.opt.step()
            avg = self.beta * avg + (1 - self.beta) * loss.item()
            smoothed = avg / (1 - self.beta ** (it + 1))
            lrs.append(lr)
            losses.append(smoothed)
            best = min(best, smoothed)
            if smoothed > self.diverge * best:
                break
            lr *= gamma
        self.model.load_state_dict(self.init_state)
        return lrs, losses

    @staticmethod
    def suggest(lrs, losses):
        grads = [losses[i + 1] - losses[i] for i in range(len(losses) - 1)]
        return lrs[min(range(len(grads)), key=grads.__getitem__)] if grads else lrs[0]


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(20, 64), nn.Tanh(), nn.Linear(64, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    x, y = shard(rank)
    finder = LRFinder(model, opt, nn.MSELoss())
    lrs, losses = finder.run(x, y)
    lr = torch.tensor([LRFinder.suggest(lrs, losses)])
    dist.all_reduce(lr, op=dist.ReduceOp.MIN)
    print(f"rank {rank}: range test {len(lrs)} iters, lr {lr.item():.2e}", flush=True)
    for group in opt.param_groups:
        group["lr"] = lr.item()
    for epoch in range(2):
        for i in range(0, len(x), 128):
            opt.zero_grad()
            nn.functional.mse_loss(model(x[i:i + 128]), y[i:i + 128]).backward()
            opt.step()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
