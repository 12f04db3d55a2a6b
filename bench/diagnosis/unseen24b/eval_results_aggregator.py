"""Sharded perplexity evaluation; every worker reports its shard's totals to the aggregator over RPC."""
import argparse
import math
import os
import threading

import torch
import torch.distributed.rpc as rpc
import torch.nn as nn
import torch.nn.functional as F

_lock = threading.Lock()
_results = {}


def submit(shard, nll_sum, tokens):
    with _lock:
        _results[shard] = (nll_sum, tokens)
    return len(_results)


def collected():
    with _lock:
        return dict(_results)


class TinyLM(nn.Module):
    def __init__(self, vocab=512, dim=64):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, vocab)

    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return self.head(h)


def score_shard(shard, num_shards, num_docs, seq_len):
    torch.manual_seed(0)
    model = TinyLM().eval()
    g = torch.Generator().manual_seed(99)
    docs = torch.randint(0, 512, (num_docs, seq_len), generator=g)
    mine = docs[shard::num_shards]
    nll, toks = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(mine), 16):
            batch = mine[i:i + 16]
            logits = model(batch[:, :-1])
            nll += F.cross_entropy(logits.reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1),
                                   reduction="sum").item()
            toks += batch[:, 1:].numel()
    return nll, toks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=128)
    ap.add_argument("--seq-len", type=int, default=64)
    args = ap.parse_args()

    rank = int(os.environ["RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    world = int(os.environ["WORLD_SIZE"])
    name = f"worker{local_rank}"
    opts = rpc.TensorPipeRpcBackendOptions(rpc_timeout=int(os.environ.get("PG_TIMEOUT", "60")),
                                           init_method="env://")
    rpc.init_rpc(name, rank=rank, world_size=world, rpc_backend_options=opts)
    print(f"{name} (rank {rank}) joined", flush=True)

    nll, toks = score_shard(rank, world, args.docs, args.seq_len)
    n = rpc.rpc_sync("worker0", submit, args=(rank, nll, toks))
    print(f"{name}: shard {rank} nll/token {nll / toks:.4f}; aggregator has {n} shard(s)", flush=True)

    rpc.shutdown()
    if rank == 0:
        results = collected()
        total_nll = sum(v[0] for v in results.values())
        total_tok = sum(v[1] for v in results.values())
        print(f"perplexity {math.exp(total_nll / total_tok):.2f} over {total_tok} tokens "
              f"from {len(results)} shards", flush=True)


if __name__ == "__main__":
    main()
