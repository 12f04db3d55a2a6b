import os
import datetime
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist


def zeropower_via_newtonschulz5(G, steps=5):
    a, b, c = 3.4445, -4.7750, 2.0315
    X = G.float()
    transposed = X.size(0) > X.size(1)
    if transposed:
        X = X.T
    X = X / (X.norm() + 1e-7)
    for _ in range(steps):
        A = X @ X.T
        B = b * A + c * A @ A
        X = a * X + B @ X
    if transposed:
        X = X.T
    return X


class Muon(torch.optim.Optimizer):
    def __init__(self, params, lr=0.02, momentum=0.95, rank=0, world_size=1):
        params = list(params)
        self.rank, self.world_size = rank, world_size
        super().__init__([dict(params=params)], dict(lr=lr, momentum=momentum))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            params = group["params"]
            pad = params + [torch.empty_like(params[-1])] * (-len(params) % self.world_size)
            for base in range(0, len(pad), self.world_size):
                if base + self.rank < len(params):
                    p = params[base + self.rank]
                    state = self.state[p]
                    if "buf" not in state:
                        state["buf"] = torch.zeros_like(p.grad)
                    buf = state["buf"]
                    buf.lerp_(p.grad, 1 - group["momentum"])
                    g = p.grad.lerp(buf, group["momentum"])
                    update = zeropower_via_newtonschulz5(g)
                    scale = max(1, p.size(-2) / p.size(-1)) ** 0.5
                    p.add_(update, alpha=-group["lr"] * scale)
                else:
                    p = pad[base + self.rank]
                dist.all_gather(pad[base:base + self.world_size], p)


class MLP(nn.Module):
    def __init__(self, d_in=64, d_hidden=128, n_classes=10):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden, bias=False)
        self.fc2 = nn.Linear(d_hidden, d_hidden, bias=False)
        self.fc3 = nn.Linear(d_hidden, d_hidden, bias=False)
        self.head = nn.Linear(d_hidden, n_classes, bias=False)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = F.relu(self.fc3(x))
        return self.head(x)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = MLP()
    hidden = [p for p in model.parameters() if p.ndim == 2]
    opt = Muon(hidden, lr=0.02, rank=rank, world_size=world)

    g = torch.Generator().manual_seed(1234 + rank)
    for step in range(20):
        x = torch.randn(32, 64, generator=g)
        y = torch.randint(0, 10, (32,), generator=g)
        loss = F.cross_entropy(model(x), y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)

    if rank == 0:
        torch.save(model.state_dict(), "muon_mlp.pt")
        print("done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
