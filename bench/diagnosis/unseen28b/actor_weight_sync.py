import os
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist


class ObsNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("var", torch.ones(dim))
        self.register_buffer("count", torch.tensor(1, dtype=torch.long))

    def update(self, x):
        n = x.shape[0]
        tot = self.count + n
        delta = x.mean(0) - self.mean
        self.mean += delta * n / tot
        self.var = (self.var * self.count + x.var(0, unbiased=False) * n + delta.pow(2) * self.count * n / tot) / tot
        self.count += n

    def forward(self, x):
        return (x - self.mean) / (self.var.sqrt() + 1e-8)


class Policy(nn.Module):
    def __init__(self, obs_dim, n_actions, hidden=64):
        super().__init__()
        self.norm = ObsNorm(obs_dim)
        self.body = nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
        self.pi = nn.Linear(hidden, n_actions)

    def forward(self, x):
        return self.pi(self.body(self.norm(x)))


def publish_weights(model):
    with torch.no_grad():
        for t in model.state_dict().values():
            dist.broadcast(t, src=0)


def receive_weights(model):
    with torch.no_grad():
        for p in model.parameters():
            dist.broadcast(p.data, src=0)


def rollout(model, obs_dim, steps, gen):
    obs, acts = [], []
    o = torch.randn(16, obs_dim, generator=gen) * 3 + 1
    for _ in range(steps):
        with torch.no_grad():
            a = torch.distributions.Categorical(logits=model(o)).sample()
        obs.append(o)
        acts.append(a)
        o = o + 0.1 * torch.randn(16, obs_dim, generator=gen)
    return torch.cat(obs), torch.cat(acts)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    obs_dim, n_actions, steps = 6, 3, 32
    model = Policy(obs_dim, n_actions)
    gen = torch.Generator().manual_seed(rank)
    if rank == 0:
        opt = torch.optim.Adam(model.parameters(), lr=3e-4)
    for it in range(20):
        if rank == 0:
            publish_weights(model)
        else:
            receive_weights(model)
        obs, acts = rollout(model, obs_dim, steps, gen)
        n = torch.tensor([obs.shape[0]])
        sizes = [torch.zeros_like(n) for _ in range(world)]
        dist.all_gather(sizes, n)
        all_obs = [torch.empty(int(s), obs_dim) for s in sizes]
        all_act = [torch.empty(int(s), dtype=torch.long) for s in sizes]
        dist.all_gather(all_obs, obs)
        dist.all_gather(all_act, acts)
        if rank == 0:
            o, a = torch.cat(all_obs), torch.cat(all_act)
            model.norm.update(o)
            logp = torch.log_softmax(model(o), -1).gather(1, a[:, None])
            loss = -logp.mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            print(f"iter {it} loss {loss.item():.4f} obs_mean {model.norm.mean.mean():.3f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
