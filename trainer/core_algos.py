"""Pure math of RL and preference training: advantages, masks and losses (after verl's ``core_algos.py``).

No training loop of Loupe's calls these: TRL's trainers compute their own (GRPO's group advantages, DPO's loss). PPO
with a critic (decoupled, length-adaptive GAE), which TRL 1.16 has no trainer for, is kept here as tested math for a
recipe that brings it back through a framework that trains it (trainer/README.md, GRPO).

Every function here takes tensors and returns tensors; none touches a model, an optimizer or a
file, so each one can be checked against numbers worked out by hand (tests/trainer/test_core_algos.py).
Shapes use ``T`` for time (tokens or turns), ``B`` for a batch, ``N`` for a flat list of items.
"""

from __future__ import annotations

import torch

__all__ = [
    "gae",
    "length_adaptive_lambda",
    "group_advantages",
    "void_turn_mask",
    "ppo_clip_loss",
    "value_loss",
    "dpo_loss",
    "masked_mean",
]


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` where ``mask`` is 1; 0 (not NaN) when the mask is empty.

    values, mask: same shape, any. Returns a scalar tensor.
    """
    mask = mask.to(values.dtype)
    total = mask.sum()
    return (values * mask).sum() / total.clamp(min=1.0)


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    gamma: float,
    lam: float | torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimation, backwards over the last axis.

    rewards, values, dones: [T] or [B, T]. ``dones[t]`` is 1 where the episode ends at t, so
    nothing after t bootstraps into t (several episodes may sit end to end in one row).
    The value after the last position is taken as 0.
    lam: a float, or a [B] tensor (one lambda per row, e.g. from :func:`length_adaptive_lambda`).

    delta_t = r_t + gamma * V_{t+1} * (1 - done_t) - V_t
    A_t     = delta_t + gamma * lam * (1 - done_t) * A_{t+1}
    returns = A + V

    With lam = 1 the returns are the discounted Monte-Carlo returns (the critic target of
    UI-TARS-2's decoupled GAE); with lam < 1 the advantages trade variance for bias (the policy's).
    Returns (advantages, returns), both shaped like ``rewards``.
    """
    squeeze = rewards.dim() == 1
    if squeeze:
        rewards, values, dones = rewards[None], values[None], dones[None]
    rewards = rewards.to(torch.float32)
    values = values.to(torch.float32)
    notdone = 1.0 - dones.to(torch.float32)
    batch, horizon = rewards.shape
    lam_t = torch.as_tensor(lam, dtype=torch.float32).reshape(-1)
    if lam_t.numel() == 1:
        lam_t = lam_t.expand(batch)
    elif lam_t.numel() != batch:
        raise ValueError(f"lam has {lam_t.numel()} entries for {batch} rows")
    advantages = torch.zeros_like(rewards)
    next_adv = torch.zeros(batch)
    next_value = torch.zeros(batch)
    for t in range(horizon - 1, -1, -1):
        delta = rewards[:, t] + gamma * next_value * notdone[:, t] - values[:, t]
        next_adv = delta + gamma * lam_t * notdone[:, t] * next_adv
        advantages[:, t] = next_adv
        next_value = values[:, t]
    returns = advantages + values
    if squeeze:
        return advantages[0], returns[0]
    return advantages, returns


def length_adaptive_lambda(length: torch.Tensor | int | float, alpha: float = 0.05) -> torch.Tensor:
    """Length-adaptive GAE lambda, ``1 - 1 / (alpha * length)`` (VAPO, used by UI-TARS-2).

    Long sequences get a lambda close to 1 (less bias over many tokens); short ones a smaller one.
    length: scalar or [B] (tokens per sequence). Clamped to [0, 1]: a sequence shorter than
    1/alpha tokens gets lambda 0 (pure one-step TD) rather than a negative, meaningless lambda.
    Returns a float tensor shaped like ``length``.
    """
    length_t = torch.as_tensor(length, dtype=torch.float32)
    lam = 1.0 - 1.0 / (alpha * length_t.clamp(min=1e-6))
    return lam.clamp(min=0.0, max=1.0)


def group_advantages(rewards: torch.Tensor, group_ids: list | torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Group-relative advantages (GRPO): ``(r - mean_group) / (std_group + eps)``.

    rewards: [N], one scalar per episode; group_ids: N hashables (e.g. "click-button:7"), episodes
    of one group being attempts at the same task and seed. The std is the population std
    (divide by n); a group of one, or one whose rewards are all equal, gets advantage 0, since it
    says nothing about which attempt was better. Returns [N] float.
    """
    rewards = torch.as_tensor(rewards, dtype=torch.float32)
    ids = group_ids.tolist() if isinstance(group_ids, torch.Tensor) else list(group_ids)
    if len(ids) != rewards.shape[0]:
        raise ValueError(f"group_ids has {len(ids)} entries, rewards has {rewards.shape[0]}")
    out = torch.zeros_like(rewards)
    members: dict = {}
    for index, gid in enumerate(ids):
        members.setdefault(gid, []).append(index)
    for index_list in members.values():
        idx = torch.tensor(index_list)
        group = rewards[idx]
        std = group.std(unbiased=False)
        if len(index_list) < 2 or std < eps:
            continue
        out[idx] = (group - group.mean()) / (std + eps)
    return out


def void_turn_mask(void_flags: torch.Tensor | list, traj_ids: torch.Tensor | list) -> torch.Tensor:
    """Mask whole trajectories that contain a void turn (SimpleTIR).

    void_flags: [N] bool, one per turn (True: the turn did not parse); traj_ids: [N], the
    trajectory each turn belongs to. Returns [N] float: 0 for every turn of a trajectory with any
    void turn, 1 elsewhere. Masking only the void turn would still reward the turns that led into
    it; masking the trajectory keeps the gradient away from the distribution shift that makes it.
    """
    flags = torch.as_tensor(void_flags, dtype=torch.bool)
    ids = traj_ids.tolist() if isinstance(traj_ids, torch.Tensor) else list(traj_ids)
    if len(ids) != flags.shape[0]:
        raise ValueError(f"traj_ids has {len(ids)} entries, void_flags has {flags.shape[0]}")
    bad = {tid for tid, flag in zip(ids, flags.tolist()) if flag}
    return torch.tensor([0.0 if tid in bad else 1.0 for tid in ids], dtype=torch.float32)


def ppo_clip_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    adv: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO clipped surrogate with decoupled clip range (clip-higher, DAPO / UI-TARS-2).

    logp, old_logp, adv, mask: [B, T] (or any equal shapes), per token.
    ratio = exp(logp - old_logp); loss_t = -min(ratio * A, clip(ratio, 1 - eps_low, 1 + eps_high) * A).
    A larger upper bound lets unlikely tokens with positive advantage grow faster, which keeps
    entropy from collapsing. Returns (token-mean loss over the mask, fraction of masked tokens clipped).
    """
    ratio = torch.exp(logp - old_logp)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * adv
    loss = -torch.minimum(unclipped, clipped)
    clip_frac = masked_mean((clipped < unclipped).to(torch.float32), mask)
    return masked_mean(loss, mask), clip_frac.detach()


def value_loss(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Half mean squared error of the critic over masked positions. values, returns, mask: [B, T]."""
    return 0.5 * masked_mean((values - returns) ** 2, mask)


def dpo_loss(
    policy_chosen_logps: torch.Tensor,
    policy_rejected_logps: torch.Tensor,
    ref_chosen_logps: torch.Tensor,
    ref_rejected_logps: torch.Tensor,
    beta: float = 0.1,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Direct preference optimization loss (Rafailov et al. 2023).

    All inputs: [B], the summed log-probability of each completion under the policy and the frozen
    reference. Implicit rewards r = beta * (logp_policy - logp_ref);
    loss = -log sigmoid(r_chosen - r_rejected), averaged over the batch.
    Returns (loss scalar, chosen rewards [B], rejected rewards [B]); their difference is the margin.
    """
    chosen_rewards = beta * (policy_chosen_logps - ref_chosen_logps)
    rejected_rewards = beta * (policy_rejected_logps - ref_rejected_logps)
    loss = -torch.nn.functional.logsigmoid(chosen_rewards - rejected_rewards).mean()
    return loss, chosen_rewards.detach(), rejected_rewards.detach()
