"""Two-stage pipeline inference over micro-batches (CPU/gloo, one process per node).

Stage 0 (rank 0) runs the encoder on each micro-batch and streams the activations to stage 1 (rank 1) with
non-blocking sends through one preallocated staging buffer, so no new tensor is allocated per micro-batch.
Stage 1 loads its head, receives every micro-batch and scores it; the scores are checked against the
per-micro-batch checksums stage 0 publishes.
"""
import datetime
import os
import time

import torch
import torch.distributed as dist
from torch import nn

MICRO_BATCHES, MB_SIZE, HIDDEN = 8, 16, 64


def encoder():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, HIDDEN))


def head():
    torch.manual_seed(1)
    return nn.Sequential(nn.LayerNorm(HIDDEN), nn.Linear(HIDDEN, 4))


def stage0(checksums: torch.Tensor):
    enc = encoder().eval()
    inputs = torch.randn(MICRO_BATCHES, MB_SIZE, 32, generator=torch.Generator().manual_seed(42))
    staging = torch.empty(MB_SIZE, HIDDEN)
    pending = []
    with torch.no_grad():
        for mb in range(MICRO_BATCHES):
            staging.copy_(enc(inputs[mb]))
            checksums[mb] = staging.double().sum()
            pending.append(dist.isend(staging, dst=1, tag=mb))
    for work in pending:
        work.wait()
    print(f"stage 0: sent {MICRO_BATCHES} micro-batches", flush=True)


def stage1(checksums: torch.Tensor):
    # Load the head and warm it up before the activations arrive.
    scorer = head().eval()
    with torch.no_grad():
        scorer(torch.zeros(1, HIDDEN))
    time.sleep(2.0)
    buffers = [torch.empty(MB_SIZE, HIDDEN) for _ in range(MICRO_BATCHES)]
    works = [dist.irecv(buffers[mb], src=0, tag=mb) for mb in range(MICRO_BATCHES)]
    for work in works:
        work.wait()
    received = torch.stack([b.double().sum() for b in buffers])
    with torch.no_grad():
        scores = [scorer(b).softmax(-1) for b in buffers]
    print(f"stage 1: scored {len(scores)} micro-batches", flush=True)
    return received


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    assert dist.get_world_size() == 2, "this pipeline has two stages"
    checksums = torch.zeros(MICRO_BATCHES, dtype=torch.float64)
    if rank == 0:
        stage0(checksums)
    else:
        received = stage1(checksums)
    dist.broadcast(checksums, src=0)
    if rank == 1:
        bad = [mb for mb in range(MICRO_BATCHES) if abs(received[mb] - checksums[mb]) > 1e-6 * abs(checksums[mb])]
        if bad:
            raise RuntimeError(f"stage 1: micro-batches {bad} arrived with other contents than stage 0 computed "
                               f"(checksums received {received.tolist()} vs sent {checksums.tolist()})")
        print("stage 1: all micro-batches verified", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
