import os
import threading
import time

import torch
import torch.distributed.rpc as rpc
import torch.nn as nn
import torch.nn.functional as F

STEPS = 5
LR = 0.05


class ParameterServer:
    def __init__(self, num_trainers):
        torch.manual_seed(0)
        self.model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
        self.num_trainers = num_trainers
        self.lock = threading.Condition()
        self.pending = []
        self.version = 0

    def get_weights(self):
        with self.lock:
            return [p.detach().clone() for p in self.model.parameters()]

    def push_and_pull(self, trainer, grads):
        with self.lock:
            self.pending.append(grads)
            my_version = self.version
            if len(self.pending) == self.num_trainers:
                with torch.no_grad():
                    for i, p in enumerate(self.model.parameters()):
                        p -= LR * sum(g[i] for g in self.pending) / self.num_trainers
                self.pending = []
                self.version += 1
                self.lock.notify_all()
            else:
                self.lock.wait_for(lambda: self.version > my_version)
            return [p.detach().clone() for p in self.model.parameters()]


_ps = None


def ps_get_weights():
    return _ps.get_weights()


def ps_push_and_pull(trainer, grads):
    return _ps.push_and_pull(trainer, grads)


def run_trainer(rank, world_size):
    torch.manual_seed(100 + rank)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    weights = rpc.rpc_sync("ps", ps_get_weights)
    for step in range(STEPS):
        with torch.no_grad():
            for p, w in zip(model.parameters(), weights):
                p.copy_(w)
        x = torch.randn(64, 16)
        y = torch.randint(0, 4, (64,))
        loss = F.cross_entropy(model(x), y)
        model.zero_grad()
        loss.backward()
        grads = [p.grad for p in model.parameters()]
        t0 = time.time()
        weights = rpc.rpc_sync("ps", ps_push_and_pull, args=(rank, grads))
        print(f"trainer {rank}: step {step} loss {loss.item():.4f} sync {time.time() - t0:.2f}s", flush=True)


def main():
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    opts = rpc.TensorPipeRpcBackendOptions(
        num_worker_threads=int(os.environ.get("RPC_THREADS", "2")),
        rpc_timeout=float(os.environ.get("RPC_TIMEOUT", "30")),
    )
    if rank == 0:
        global _ps
        _ps = ParameterServer(num_trainers=world_size - 1)
        rpc.init_rpc("ps", rank=0, world_size=world_size, rpc_backend_options=opts)
        print(f"ps: serving {world_size - 1} trainers", flush=True)
    else:
        rpc.init_rpc(f"trainer{rank}", rank=rank, world_size=world_size, rpc_backend_options=opts)
        run_trainer(rank, world_size)
    rpc.shutdown()
    if rank == 0:
        print(f"ps: finished at version {_ps.version}", flush=True)


if __name__ == "__main__":
    main()
