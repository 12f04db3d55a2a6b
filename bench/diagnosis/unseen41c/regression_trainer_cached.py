import datetime
import functools
import logging
import os

import torch
import torch.distributed as dist
import torch.nn as nn


# ---- dist_utils -----------------------------------------------------------
@functools.lru_cache(maxsize=None)
def get_rank():
    return dist.get_rank() if dist.is_initialized() else 0


@functools.lru_cache(maxsize=None)
def get_world_size():
    return dist.get_world_size() if dist.is_initialized() else 1


def setup_logging(name="trainer"):
    logger = logging.getLogger(name)
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(
        f"%(asctime)s [rank {get_rank()}/{get_world_size()}] %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO if get_rank() == 0 else logging.WARNING)
    return logger


def init_distributed():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)


def all_gather_tensor(t):
    out = [torch.empty_like(t) for _ in range(get_world_size())]
    dist.all_gather(out, t.contiguous())
    return torch.cat(out)


def all_reduce_grads(model):
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)
            p.grad /= dist.get_world_size()
# ---------------------------------------------------------------------------


class MLP(nn.Module):
    def __init__(self, d_in=12, hidden=32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x)


def main():
    log = setup_logging()
    log.info("starting regression trainer")
    init_distributed()
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(1234)
    x = torch.randn(400, 12)
    y = x[:, :3].sum(dim=1, keepdim=True) + 0.05 * torch.randn(400, 1)
    xs, ys = x[rank::world], y[rank::world]

    model = MLP()
    for p in model.parameters():
        dist.broadcast(p.data, src=0)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    for epoch in range(3):
        for i in range(0, xs.shape[0], 25):
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(xs[i:i + 25]), ys[i:i + 25])
            loss.backward()
            all_reduce_grads(model)
            opt.step()
        with torch.no_grad():
            err = (model(xs) - ys).abs().squeeze(1)
        all_err = all_gather_tensor(err)
        log.info("epoch %d mae %.4f p90 %.4f over %d rows", epoch,
                 all_err.mean().item(), all_err.quantile(0.9).item(), all_err.numel())

    dist.barrier()
    log.info("finished")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
