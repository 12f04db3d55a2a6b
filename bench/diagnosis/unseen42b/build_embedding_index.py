"""Encode a passage corpus into an embedding index sharded across ranks.

Each rank takes its part of the corpus, encodes it with a small frozen projection
encoder, writes its shard plus an id map, and the job verifies the shards cover
the whole corpus before publishing the manifest.
"""
import datetime
import json
import os

import torch
import torch.distributed as dist

N_PASSAGES = 6000
VOCAB = 5000
SEQ = 24
DIM = 128


def corpus():
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, VOCAB, (N_PASSAGES, SEQ), generator=g)


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(42)
        self.emb = torch.nn.EmbeddingBag(VOCAB, DIM, mode="mean")
        self.proj = torch.nn.Linear(DIM, DIM)

    @torch.no_grad()
    def forward(self, tokens):
        return torch.nn.functional.normalize(self.proj(self.emb(tokens)), dim=-1)


def my_part(tokens, ids, rank, world):
    if world == 1:
        return tokens, ids
    return torch.split(tokens, world)[rank], torch.split(ids, world)[rank]


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    tokens = corpus()
    ids = torch.arange(N_PASSAGES)
    part, part_ids = my_part(tokens, ids, rank, world)

    enc = Encoder()
    vecs = torch.cat([enc(b) for b in part.split(512)])
    out = os.path.abspath("index_out")
    os.makedirs(out, exist_ok=True)
    torch.save({"ids": part_ids, "vecs": vecs}, os.path.join(out, f"shard_{rank:03d}.pt"))

    covered = torch.tensor([part_ids.numel()])
    dist.all_reduce(covered)
    if int(covered) != N_PASSAGES:
        raise RuntimeError(f"index shards cover {int(covered)} of {N_PASSAGES} passages")

    if rank == 0:
        with open(os.path.join(out, "manifest.json"), "w") as f:
            json.dump({"shards": world, "passages": N_PASSAGES, "dim": DIM}, f)
        print(f"index built: {world} shards, {N_PASSAGES} passages")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
