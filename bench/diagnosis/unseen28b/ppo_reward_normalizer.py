import os
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class ActorCritic(nn.Module):
    def __init__(self, obs_dim, act_dim, hidden=64):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh())
        self.mu = nn.Linear(hidden, act_dim)
        self.log_std = nn.Parameter(torch.zeros(act_dim))
        self.v = nn.Linear(hidden, 1)

    def forward(self, x):
        h = self.body(x)
        return self.mu(h), self.log_std.exp().expand(x.shape[0], -1), self.v(h).squeeze(-1)


class RewardScaler:
    def __init__(self):
        self.mean, self.std = 0.0, 1.0

    def update(self, rewards):
        n = torch.tensor(float(rewards.numel()))
        stats = torch.stack([rewards.sum(), rewards.pow(2).sum()])
        dist.all_reduce(stats)
        mean = stats[0] / n
        var = stats[1] / n - mean.pow(2)
        self.mean, self.std = mean.item(), var.sqrt().item()

    def __call__(self, r):
        return (r - self.mean) / (self.std + 1e-8)


def collect(model, obs_dim, T, n_envs, gen):
    obs = torch.randn(T, n_envs, obs_dim, generator=gen)
    with torch.no_grad():
        mu, std, v = model(obs.reshape(-1, obs_dim))
        act = torch.normal(mu, std, generator=gen)
        logp = torch.distributions.Normal(mu, std).log_prob(act).sum(-1)
    rew = 1.0 + 0.3 * torch.randn(T, n_envs, generator=gen) - 0.05 * act.pow(2).sum(-1).reshape(T, n_envs)
    return obs.reshape(-1, obs_dim), act, logp, v, rew


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    obs_dim, act_dim, T, n_envs, gamma = 5, 2, 64, 8, 0.99
    model = DDP(ActorCritic(obs_dim, act_dim))
    opt = torch.optim.Adam(model.parameters(), lr=3e-4)
    scaler = RewardScaler()
    gen = torch.Generator().manual_seed(10 + rank)
    for update in range(30):
        obs, act, old_logp, old_v, rew = collect(model.module, obs_dim, T, n_envs, gen)
        scaler.update(rew)
        rew = scaler(rew)
        ret = torch.zeros_like(rew)
        run = torch.zeros(n_envs)
        for t in reversed(range(T)):
            run = rew[t] + gamma * run
            ret[t] = run
        ret = ret.reshape(-1)
        adv = ret - old_v
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        for epoch in range(4):
            mu, std, v = model(obs)
            logp = torch.distributions.Normal(mu, std).log_prob(act).sum(-1)
            ratio = (logp - old_logp).exp()
            pg = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()
            loss = pg + 0.5 * (v - ret).pow(2).mean()
            if not torch.isfinite(loss):
                raise RuntimeError(f"non-finite loss at update {update} epoch {epoch}: {loss.item()}")
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            opt.step()
        if rank == 0:
            print(f"update {update} loss {loss.item():.4f} reward_std {scaler.std:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
