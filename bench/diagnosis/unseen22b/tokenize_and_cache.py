"""Pack this node's slice of the corpus into fixed-length sequences, cache the packed tokens so the
local workers (and later runs) reuse them, then fine-tune a small next-token model with DDP."""
import datetime
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

SEQ = 32
VOCAB = 512
N_DOCS = 600
STEPS = 20
CACHE_DIR = os.path.join(os.getcwd(), ".token_cache")


def corpus_slice(node, n_nodes):
    rng = np.random.default_rng(1234)
    docs = [rng.integers(1, VOCAB, size=int(rng.integers(20, 200))) for _ in range(N_DOCS)]
    return docs[node::n_nodes]


def pack(docs):
    flat = np.concatenate(docs)
    n_seq = len(flat) // SEQ
    return flat[: n_seq * SEQ].reshape(n_seq, SEQ).astype(np.int64)


def boundary_mask(docs):
    lengths = np.array([len(d) for d in docs])
    n_seq = int(lengths.sum()) // SEQ
    starts = np.zeros(int(lengths.sum()), dtype=np.float32)
    starts[np.cumsum(lengths)[:-1]] = 1.0
    return 1.0 - starts[: n_seq * SEQ].reshape(n_seq, SEQ)


def cached_tokens(docs, local_rank):
    path = os.path.join(CACHE_DIR, f"packed_seq{SEQ}_v{VOCAB}.npy")
    if local_rank == 0:
        os.makedirs(CACHE_DIR, exist_ok=True)
        if not os.path.exists(path):
            np.save(path, pack(docs))
            print(f"[cache] built {path}", flush=True)
        else:
            print(f"[cache] reusing {path}", flush=True)
    dist.barrier()
    return np.load(path)


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 64)
        self.mix = nn.Linear(64, 64)
        self.head = nn.Linear(64, VOCAB)

    def forward(self, x):
        return self.head(torch.tanh(self.mix(self.emb(x))))


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])
    local_world = int(os.environ["LOCAL_WORLD_SIZE"])
    node, n_nodes = rank // local_world, world // local_world
    torch.manual_seed(0)

    docs = corpus_slice(node, n_nodes)
    tokens = torch.from_numpy(cached_tokens(docs, local_rank))
    mask = torch.from_numpy(boundary_mask(docs))
    dataset = TensorDataset(tokens, mask)
    sampler = DistributedSampler(dataset, num_replicas=local_world, rank=local_rank, seed=node)
    loader = DataLoader(dataset, batch_size=8, sampler=sampler, drop_last=True)
    print(f"rank {rank} (node {node}): {len(dataset)} sequences", flush=True)

    model = DDP(TinyLM())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss(reduction="none")
    step = 0
    while step < STEPS:
        for x, m in loader:
            logits = model(x[:, :-1])
            loss = loss_fn(logits.reshape(-1, VOCAB), x[:, 1:].reshape(-1))
            loss = (loss * m[:, 1:].reshape(-1)).sum() / m[:, 1:].sum().clamp(min=1)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step % 5 == 0 and rank == 0:
                print(f"step {step} loss {loss.item():.4f}", flush=True)
            if step >= STEPS:
                break
    dist.barrier()
    if rank == 0:
        print("done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
