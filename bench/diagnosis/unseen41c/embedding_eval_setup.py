import datetime
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn


# ---- dist_utils -----------------------------------------------------------
class DistContext:
    rank = 0
    world_size = 1
    local_rank = 0
    device = torch.device("cpu")


CTX = DistContext()


def init_dist():
    if "RANK" not in os.environ:
        return CTX
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    num_devices = torch.cuda.device_count()
    CTX.rank = int(os.environ["RANK"])
    CTX.world_size = int(os.environ["WORLD_SIZE"])
    CTX.local_rank = CTX.rank % num_devices
    if torch.cuda.is_available():
        torch.cuda.set_device(CTX.local_rank)
        CTX.device = torch.device("cuda", CTX.local_rank)
        backend = "nccl"
    else:
        backend = "gloo"
    dist.init_process_group(backend, timeout=timeout)
    return CTX


def master_print(*args):
    if CTX.rank == 0:
        print("[eval]", *args, flush=True)


def gather_concat(t):
    if CTX.world_size == 1:
        return t
    out = [torch.empty_like(t) for _ in range(CTX.world_size)]
    dist.all_gather(out, t)
    return torch.cat(out)
# ---------------------------------------------------------------------------


def build_encoder(d_in=20, d_out=8):
    torch.manual_seed(7)
    return nn.Sequential(nn.Linear(d_in, 32), nn.Tanh(), nn.Linear(32, d_out))


def main():
    ctx = init_dist()
    rng = np.random.default_rng(11)
    queries = torch.from_numpy(rng.standard_normal((256, 20)).astype(np.float32))
    labels = torch.from_numpy(rng.integers(0, 4, 256))

    enc = build_encoder().to(ctx.device).eval()
    q = queries[ctx.rank::ctx.world_size].to(ctx.device)
    lab = labels[ctx.rank::ctx.world_size]

    with torch.no_grad():
        emb = nn.functional.normalize(enc(q), dim=1).cpu()

    all_emb = gather_concat(emb)
    all_lab = gather_concat(lab)
    sim = all_emb @ all_emb.T
    sim.fill_diagonal_(-2.0)
    nn_idx = sim.argmax(dim=1)
    acc = (all_lab[nn_idx] == all_lab).float().mean().item()
    master_print(f"1-NN label agreement over {all_emb.shape[0]} queries: {acc:.3f}")

    if ctx.world_size > 1:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
