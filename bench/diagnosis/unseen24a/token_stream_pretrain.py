import os
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

SEQ, BATCH, VOCAB = 16, 4, 97


def build_shard(rank):
    """Packed token stream for this rank (documents separated by token 0)."""
    rng = np.random.default_rng(2024 + rank)
    docs = [rng.integers(1, VOCAB, size=rng.integers(40, 200)) for _ in range(12 + 6 * (rank % 2 == 0))]
    return np.concatenate([np.append(d, 0) for d in docs]).astype(np.int64)


class TokenStream:
    def __init__(self, tokens):
        self.tokens = tokens
        self.position = 0

    def next_batch(self):
        need = BATCH * SEQ + 1
        if self.position + need > len(self.tokens):
            self.position = 0
        chunk = self.tokens[self.position:self.position + need]
        self.position += BATCH * SEQ
        x = torch.from_numpy(chunk[:-1].reshape(BATCH, SEQ))
        y = torch.from_numpy(chunk[1:].reshape(BATCH, SEQ))
        return x, y

    def state_dict(self):
        return {"position": self.position, "length": len(self.tokens)}

    def load_state_dict(self, state):
        if state["length"] != len(self.tokens):
            raise ValueError(f"data state is for a stream of {state['length']} tokens, this shard has {len(self.tokens)}")
        self.position = state["position"]


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 32)
        self.rnn = nn.GRU(32, 32, batch_first=True)
        self.head = nn.Linear(32, VOCAB)

    def forward(self, x):
        return self.head(self.rnn(self.emb(x))[0])


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank = dist.get_rank()
    steps, ckpt_every = int(os.environ.get("STEPS", "30")), int(os.environ.get("CKPT_EVERY", "10"))
    ckpt = os.environ.get("CKPT_PATH", "pretrain_state.pt")
    torch.manual_seed(0)
    model = DDP(TinyLM())
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    stream = TokenStream(build_shard(rank))

    step = 0
    resumed = False
    while step < steps:
        x, y = stream.next_batch()
        loss = nn.functional.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step % ckpt_every == 0:
            if rank == 0:
                torch.save({"step": step, "model": model.module.state_dict(), "optim": opt.state_dict(),
                            "data": stream.state_dict(), "rng": torch.get_rng_state()}, ckpt)
                print(f"step {step} loss {loss.item():.3f} saved", flush=True)
            dist.barrier()
            if not resumed and os.environ.get("RESUME_CHECK", "1") == "1":
                state = torch.load(ckpt, weights_only=True)
                model.module.load_state_dict(state["model"])
                opt.load_state_dict(state["optim"])
                stream.load_state_dict(state["data"])
                torch.set_rng_state(state["rng"])
                step, resumed = state["step"], True
    if rank == 0:
        print("pretraining done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
