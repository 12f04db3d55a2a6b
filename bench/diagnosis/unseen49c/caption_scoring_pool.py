"""Score synthetic caption batches with a small frozen model, work handed out by rank 0.

The coordinator owns the list of batches and a lease table; workers pull a
Job, score it and send back a JobResult.  Batches whose worker reports an
error are retried up to MAX_ATTEMPTS times.
"""
import os
from dataclasses import dataclass, field
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

MAX_ATTEMPTS = 3
N_BATCHES = 10


@dataclass
class Job:
    job_id: int
    n_items: int
    seed: int
    attempt: int = 0


@dataclass
class JobResult:
    job_id: int
    worker: int
    scores: list = field(default_factory=list)
    error: str = ""


SHUTDOWN = Job(job_id=-1, n_items=0, seed=0)


def build_scorer():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 1)).eval()


def score(model, job):
    g = torch.Generator().manual_seed(job.seed)
    feats = torch.randn(job.n_items, 32, generator=g)
    with torch.no_grad():
        return torch.sigmoid(model(feats)).squeeze(-1).tolist()


def coordinator(world):
    pending = [Job(job_id=i, n_items=16 + 4 * i, seed=77 + i) for i in range(N_BATCHES)]
    leases = {}
    done = {}
    idle = set()
    box = [None]
    hdr = torch.zeros(1, dtype=torch.long)
    while len(done) < N_BATCHES:
        src = dist.recv(hdr)
        dist.recv_object_list(box, src=src)
        res = box[0]
        if isinstance(res, JobResult):
            job = leases.pop(res.job_id)
            if res.error:
                job.attempt += 1
                if job.attempt >= MAX_ATTEMPTS:
                    raise RuntimeError(f"job {job.job_id} failed {MAX_ATTEMPTS} times: {res.error}")
                pending.append(job)
            else:
                done[res.job_id] = res.scores
                print(f"[coord] job {res.job_id} done by rank {src} ({len(done)}/{N_BATCHES})", flush=True)
        if pending:
            job = pending.pop(0)
            leases[job.job_id] = job
            dist.send_object_list([job], dst=src)
        else:
            idle.add(src)
    for w in range(1, world):
        if w not in idle:
            dist.recv(hdr, src=w)
            dist.recv_object_list(box, src=w)
        dist.send_object_list([SHUTDOWN], dst=w)
    flat = [s for j in sorted(done) for s in done[j]]
    print(f"[coord] scored {len(flat)} captions, mean score {sum(flat) / len(flat):.4f}", flush=True)


def report(rank, obj):
    dist.send(torch.tensor([rank]), dst=0)
    dist.send_object_list([obj], dst=0)


def worker(rank):
    model = build_scorer()
    report(rank, None)
    box = [None]
    n = 0
    while True:
        dist.recv_object_list(box, src=0)
        job = box[0]
        if job is SHUTDOWN:
            break
        try:
            result = JobResult(job_id=job.job_id, worker=rank, scores=score(model, job))
        except Exception as exc:
            result = JobResult(job_id=job.job_id, worker=rank, error=repr(exc))
        n += 1
        report(rank, result)
    print(f"[rank {rank}] scored {n} jobs", flush=True)


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        coordinator(world)
    else:
        worker(rank)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
