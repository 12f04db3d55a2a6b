import datetime
import io
import os
import socket
import struct
import time

import torch
import torch.distributed as dist
import torch.nn as nn

SYNC_PORT = int(os.environ.get("SYNC_PORT", "29538"))
HIDDEN = 1024


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(256, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 4 * HIDDEN), nn.ReLU())
        self.head = nn.Linear(4 * HIDDEN, 8)

    def forward(self, x):
        return self.head(self.body(x))


def train_steps(policy, steps=2):
    opt = torch.optim.Adam(policy.parameters(), lr=1e-4)
    for _ in range(steps):
        obs = torch.randn(16, 256)
        loss = -policy(obs).log_softmax(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def publish_weights(policy, n_clients):
    buf = io.BytesIO()
    torch.save(policy.state_dict(), buf)
    payload = buf.getvalue()
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", SYNC_PORT))
    srv.listen(n_clients)
    dist.barrier()
    for _ in range(n_clients):
        conn, _ = srv.accept()
        conn.sendall(struct.pack("!Q", len(payload)) + payload)
        conn.close()
    srv.close()
    return len(payload)


def pull_weights(master):
    dist.barrier()
    with socket.create_connection((master, SYNC_PORT), timeout=30) as s:
        size = struct.unpack("!Q", s.recv(8))[0]
        blob = s.recv(size)
    return torch.load(io.BytesIO(blob), map_location="cpu")


def evaluate(policy, episodes=4):
    with torch.no_grad():
        scores = [policy(torch.randn(32, 256)).argmax(-1).float().mean() for _ in range(episodes)]
    return torch.stack(scores).mean()


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)
    policy = Policy()

    t0 = time.time()
    if rank == 0:
        train_steps(policy)
        size = publish_weights(policy, world - 1)
        print(f"learner: published {size / 1e6:.1f} MB of weights in {time.time() - t0:.1f}s", flush=True)
    else:
        policy.load_state_dict(pull_weights(os.environ["MASTER_ADDR"]))
    score = evaluate(policy).reshape(1)
    dist.all_reduce(score)
    if rank == 0:
        print(f"mean rollout score over {world} actors: {score.item() / world:.3f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
