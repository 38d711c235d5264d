"""RL on whole episodes: PPO with UI-TARS-2's recipe, or group-relative advantages (GRPO).

One iteration: get a batch of episodes (offline: sampled from an RL snapshot; online: fresh
on-policy episodes from agent.rollout in the real env), turn them into token sequences, compute
advantages (core_algos), update. The math lives in core_algos.py; this file only schedules.

PPO (``--advantage gae``):
- a critic (a copy of the init with a scalar head) gives a value per output token;
- decoupled GAE: the critic's targets use ``lambda_critic`` (1.0: Monte-Carlo returns), the
  policy's advantages ``lambda_policy`` or, by default, the length-adaptive ``1 - 1/(alpha * len)``;
- value pretraining: the first ``value_pretrain_steps`` iterations update only the critic, with
  the policy fixed, so the first policy gradient already has a useful baseline;
- clip-higher: the ratio is clipped to [1 - eps_low, 1 + eps_high].
GRPO (``--advantage grpo``): no critic; every token of an episode gets its group-normalised
episode reward (groups: attempts at the same task and seed).
Void turns (SimpleTIR): an episode with a turn that did not parse is masked out whole.
"""

from __future__ import annotations

import copy
import json
import logging
import random
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from agent import rows as R
from trainer import core_algos as A
from trainer import data as D
from trainer.configs import RLConfig, config_dict, parse_seeds, parse_tasks
from trainer.model import (LOUPE_FILE, TrainerError, load, resolve_device, resolve_dtype, save_checkpoint,
                           sha256_file, training_prompt_style)
from trainer.optim import Timer, clip_and_step, emit, make_optimizer, set_seed, set_threads

log = logging.getLogger("trainer")


class Critic(torch.nn.Module):
    """A causal LM trunk with a scalar value head on its last hidden state."""

    def __init__(self, lm) -> None:
        super().__init__()
        self.lm = lm
        self.head = torch.nn.Linear(lm.config.hidden_size, 1)
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Values [B, T-1]: entry t is the value of the state that predicts token t + 1."""
        out = self.lm(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
        hidden = out.hidden_states[-1][:, :-1]
        return self.head(hidden.to(self.head.weight.dtype))[..., 0]


@dataclass
class Sequence:
    """One step of one episode as a token example, with its place in the batch."""

    example: D.Example
    episode: int  # index into the batch's episodes
    old_logprobs: list[float]  # may be empty: recomputed before the update


def build_sequences(tokenizer, episodes: list[R.RLRow], max_length: int) -> list[Sequence]:
    """Every step of every episode as prompt + sampled output tokens, labels on the output."""
    sequences = []
    for index, episode in enumerate(episodes):
        for step in episode.steps:
            ids = step.output_token_ids or D.completion_example(
                tokenizer, step.prompt, [{"role": "assistant", "content": step.output}], 10**9
            ).input_ids[len(D.chat_ids(tokenizer, step.prompt, add_generation_prompt=True)):]
            if not ids:
                continue
            example = D.completion_example(tokenizer, step.prompt, ids, max_length)
            olds = step.old_logprobs if step.output_token_ids and len(step.old_logprobs) == len(ids) else []
            sequences.append(Sequence(example=example, episode=index, old_logprobs=olds))
    return sequences


def _forward(model, sequences: list[Sequence], pad_id: int, device) -> tuple[dict, torch.Tensor, torch.Tensor]:
    batch = {k: v.to(device) for k, v in D.collate([s.example for s in sequences], pad_id).items()}
    logp, mask = D.token_logprobs(model, batch)
    return batch, logp, mask


def _per_token(values: list[list[float]], mask: torch.Tensor) -> torch.Tensor:
    """Scatter per-sequence lists of per-output-token values onto the [B, T-1] mask."""
    out = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)
    flat = [v for row in values for v in row]
    out[mask] = torch.tensor(flat, dtype=torch.float32, device=mask.device)
    return out


def _chunks(items: list[int], lengths: list[int], batch_tokens: int) -> list[list[int]]:
    """Consecutive index groups of at most ``batch_tokens`` padded tokens."""
    groups, current, longest = [], [], 0
    for index in items:
        longest_if = max(longest, lengths[index])
        if current and longest_if * (len(current) + 1) > batch_tokens:
            groups.append(current)
            current, longest_if = [], lengths[index]
        current.append(index)
        longest = longest_if
    if current:
        groups.append(current)
    return groups


def compute_advantages(config: RLConfig, episodes: list[R.RLRow], sequences: list[Sequence],
                       values: list[list[float]] | None) -> tuple[list[list[float]], list[list[float]] | None]:
    """Per-output-token policy advantages and (PPO only) critic targets, per sequence.

    values: per sequence, the critic's value of every output token (PPO), or None (GRPO).
    """
    if config.advantage == "grpo":
        adv = A.group_advantages(torch.tensor([e.reward for e in episodes]), [e.group for e in episodes])
        return [[float(adv[s.episode])] * _label_count(s) for s in sequences], None
    assert values is not None
    advantages: list[list[float]] = [[] for _ in sequences]
    targets: list[list[float]] = [[] for _ in sequences]
    by_episode: dict[int, list[int]] = {}
    for index, seq in enumerate(sequences):
        by_episode.setdefault(seq.episode, []).append(index)
    for episode_index, seq_indices in by_episode.items():
        episode = episodes[episode_index]
        lengths = [len(values[i]) for i in seq_indices]
        rewards = torch.zeros(sum(lengths))
        step_rewards = [s.reward for s in episode.steps][: len(seq_indices)]
        ends = torch.tensor(lengths).cumsum(0) - 1
        for end, reward in zip(ends.tolist(), step_rewards):
            rewards[end] += reward
        # The episode reward is the truth: what the step rewards do not account for lands at the end.
        rewards[-1] += episode.reward - sum(step_rewards)
        value_t = torch.tensor([v for i in seq_indices for v in values[i]])
        dones = torch.zeros_like(rewards)
        dones[-1] = 1.0
        lam = A.length_adaptive_lambda(len(rewards), config.alpha) if config.length_adaptive else config.lambda_policy
        policy_adv, _ = A.gae(rewards, value_t, dones, config.gamma, lam)
        _, critic_target = A.gae(rewards, value_t, dones, config.gamma, config.lambda_critic)
        offset = 0
        for i, n in zip(seq_indices, lengths):
            advantages[i] = policy_adv[offset:offset + n].tolist()
            targets[i] = critic_target[offset:offset + n].tolist()
            offset += n
    return advantages, targets


def _label_count(seq: Sequence) -> int:
    return sum(1 for t in seq.example.labels[1:] if t != D.IGNORE)


class Collector:
    """Fresh on-policy episodes from agent.rollout in the real environment (online RL)."""

    def __init__(self, config: RLConfig, workdir: Path) -> None:
        from agent.envs import make_env
        from agent.policies.local import LocalPolicy

        self.config = config
        self.tasks = parse_tasks(config.tasks)
        self.seeds = parse_seeds(config.seeds)
        if not self.tasks or not self.seeds:
            raise TrainerError("online RL needs --tasks and --seeds")
        self.env = make_env(config.env)
        self.workdir = workdir
        self.policy_cls = LocalPolicy
        self.policy = None
        self.rng = random.Random(config.seed)

    def collect(self, loaded, iteration: int) -> list[R.RLRow]:
        """Save the current weights, point the policy at them, roll out a batch of groups."""
        from agent.rollout import run_episode

        snapshot = self.workdir / "policy"
        loaded.model.save_pretrained(snapshot)
        loaded.tokenizer.save_pretrained(snapshot)
        # the policy renders its prompts in the style the model reads, as a deployment would
        (snapshot / LOUPE_FILE).write_text(json.dumps({"prompt_style": loaded.prompt_style}) + "\n")
        if self.policy is None:
            self.policy = self.policy_cls(str(snapshot), temperature=self.config.temperature,
                                          max_new_tokens=self.config.max_new_tokens, seed=self.config.seed)
        else:
            self.policy.reload(str(snapshot))
        episodes = []
        groups = max(1, self.config.episodes_per_step // max(1, self.config.group_size))
        for g in range(groups):
            task = self.tasks[(iteration * groups + g) % len(self.tasks)]
            seed = self.rng.choice(self.seeds)
            for attempt in range(self.config.group_size):
                result = run_episode(self.env, self.policy, task=task, seed=seed,
                                     max_steps=self.config.max_episode_steps)
                episodes.append(episode_from_result(result, task=task, seed=seed,
                                                    episode_id=f"{iteration}-{g}-{attempt}"))
        return episodes

    def close(self) -> None:
        self.env.close()


def episode_from_result(result, *, task: str, seed: int, episode_id: str) -> R.RLRow:
    """agent.rollout's EpisodeResult -> the RL row shape of data.py (validated the same way).

    Only the model's own steps carry tokens to learn from; replayed or human steps are skipped.
    """
    from agent.policies.local import messages_as_text

    steps = []
    for step in result.steps:
        if step.output is None or step.actor != "model":
            continue
        steps.append({
            "prompt": messages_as_text(step.prompt),
            "output": step.output.text,
            "output_token_ids": list(step.output.token_ids),
            "old_logprobs": list(step.output.token_logprobs),
            "reward": float(step.reward or 0.0),
            "void": bool(step.turn.is_void),
        })
    if not steps:  # e.g. the env failed before the first step: an empty episode teaches nothing
        steps.append({"prompt": [{"role": "user", "content": ""}], "output": "", "reward": 0.0, "void": True})
    row = {"episode_id": episode_id, "task": task, "seed": seed, "reward": float(result.reward),
           "group": f"{task}:{seed}", "steps": steps}
    return D.rl_episode_from_row(row, f"episode {episode_id}")


def train_rl(config: RLConfig) -> dict:
    """Run ``config.max_steps`` RL iterations from ``config.init``; save to ``config.out``."""
    if not config.out:
        raise TrainerError("--out is required: the dir to write the checkpoint to")
    if config.advantage == "grpo" and config.tasks and config.group_size < 2:
        raise TrainerError("--advantage grpo needs --group-size >= 2: one attempt per group has no baseline")
    online = bool(config.tasks)
    if not online and not config.data:
        raise TrainerError("RL needs --data (an RL snapshot) or --tasks/--seeds (online episodes)")
    set_threads(config.threads)
    rng = set_seed(config.seed)
    offline = D.read_rl(config.data, init=config.init, action_format=config.action_format) if not online else []
    device = resolve_device(config.device)
    dtype = resolve_dtype(config.dtype, device)
    loaded = load(config.init, device=device, dtype=dtype, lora=config.lora, seed=config.seed)
    model, tokenizer = loaded.model, loaded.tokenizer
    training_prompt_style(loaded, config.prompt_style)  # offline episodes keep the prompts they were acted on
    pad = tokenizer.pad_token_id
    reference = None
    if config.kl_coef > 0:
        reference = copy.deepcopy(model).eval().requires_grad_(False)
    critic = critic_opt = critic_sched = None
    if config.advantage == "gae":
        trunk = load(config.init, device=device, dtype=dtype, seed=config.seed).model
        critic = Critic(trunk).to(device)
        critic_opt, critic_sched = make_optimizer(critic.parameters(), config, lr=config.critic_lr)
    optimizer, scheduler = make_optimizer(model.parameters(), config)
    workdir = Path(tempfile.mkdtemp(prefix="loupe-rl-"))
    collector = Collector(config, workdir) if online else None
    history: list[dict] = []
    timer = Timer()
    try:
        for iteration in range(config.max_steps):
            t_rollout = Timer()
            if collector is not None:
                model.eval()
                episodes = collector.collect(loaded, iteration)
            else:
                episodes = rng.sample(offline, min(len(offline), config.episodes_per_step))
            rollout_s = t_rollout.elapsed()
            t_update = Timer()
            record = update(config, model, critic, reference, optimizer, scheduler, critic_opt, critic_sched,
                            tokenizer, episodes, pad, device,
                            policy_frozen=critic is not None and iteration < config.value_pretrain_steps)
            scheduler.step()  # the schedules count iterations, not minibatches
            if critic_sched is not None:
                critic_sched.step()
            record.update({"step": iteration + 1, "total": config.max_steps, "rollout_s": rollout_s,
                           "update_s": t_update.elapsed()})
            history.append(record)
            emit(record)
    finally:
        if collector is not None:
            collector.close()
    rewards = [h["reward"] for h in history]
    head = rewards[: max(1, len(rewards) // 4)]
    tail = rewards[-max(1, len(rewards) // 4):]
    metrics = {
        "algorithm": "rl",
        "advantage": config.advantage,
        "iterations": len(history),
        "reward_first": sum(head) / len(head),
        "reward_last": sum(tail) / len(tail),
        "reward_history": rewards,
        "void_rate": sum(h["void_rate"] for h in history) / max(1, len(history)),
        "rollout_seconds": [h["rollout_s"] for h in history],
        "update_seconds": [h["update_s"] for h in history],
        "train_seconds": timer.elapsed(),
    }
    save_checkpoint(loaded, config.out, algorithm="rl", config=config_dict(config),
                    data_sha256=sha256_file(config.data) if config.data else None, metrics=metrics)
    return metrics


def update(config: RLConfig, model, critic, reference, optimizer, scheduler, critic_opt, critic_sched,
           tokenizer, episodes: list[R.RLRow], pad: int, device, *, policy_frozen: bool) -> dict:
    """One RL update on a batch of episodes. Returns the progress record (loss, reward, ...)."""
    sequences = build_sequences(tokenizer, episodes, config.max_length)
    void_mask = A.void_turn_mask([e.has_void for e in episodes], list(range(len(episodes))))
    if not config.mask_void:
        void_mask = torch.ones_like(void_mask)
    record = {
        "reward": sum(e.reward for e in episodes) / max(1, len(episodes)),
        "success_rate": sum(1 for e in episodes if e.reward > 0) / max(1, len(episodes)),
        "void_rate": sum(1 for e in episodes if e.has_void) / max(1, len(episodes)),
        "episodes": len(episodes),
    }
    if not sequences:
        return {**record, "loss": 0.0}
    lengths = [len(s.example) for s in sequences]
    order = sorted(range(len(sequences)), key=lambda i: lengths[i])
    chunks = _chunks(order, lengths, config.batch_tokens)
    # Old log-probs where the rollout did not record them, and the critic's values: both with
    # the weights that acted (before any update of this iteration).
    values: list[list[float]] | None = [[] for _ in sequences] if critic is not None else None
    model.eval()
    with torch.no_grad():
        for chunk in chunks:
            seqs = [sequences[i] for i in chunk]
            batch, logp, mask = _forward(model, seqs, pad, device)
            for row, i in enumerate(chunk):
                if not sequences[i].old_logprobs:
                    sequences[i].old_logprobs = logp[row][mask[row]].tolist()
            if critic is not None:
                v = critic(batch["input_ids"], batch["attention_mask"])
                for row, i in enumerate(chunk):
                    values[i] = v[row][mask[row]].float().tolist()  # type: ignore[index]
    advantages, targets = compute_advantages(config, episodes, sequences, values)
    losses, value_losses, clip_fracs, kls = [], [], [], []
    for _ in range(config.ppo_epochs):
        for chunk in chunks:
            seqs = [sequences[i] for i in chunk]
            loss_mask_rows = torch.tensor([float(void_mask[s.episode]) for s in seqs], device=device)
            if critic is not None:
                critic.train()
                batch = {k: v.to(device) for k, v in D.collate([s.example for s in seqs], pad).items()}
                mask = (batch["labels"][:, 1:] != D.IGNORE)
                v = critic(batch["input_ids"], batch["attention_mask"])
                target = _per_token([targets[i] for i in chunk], mask)  # type: ignore[index]
                vloss = A.value_loss(v.float(), target, mask.float())
                vloss.backward()
                clip_and_step(critic, critic_opt, critic_sched, config.grad_clip, advance=False)
                value_losses.append(float(vloss.detach()))
            if policy_frozen:
                continue
            model.train()
            batch, logp, mask = _forward(model, seqs, pad, device)
            old = _per_token([sequences[i].old_logprobs for i in chunk], mask)
            adv = _per_token([advantages[i] for i in chunk], mask)
            token_mask = mask.float() * loss_mask_rows[:, None]
            loss, clip_frac = A.ppo_clip_loss(logp, old, adv, token_mask, config.eps_low, config.eps_high)
            if reference is not None:
                with torch.no_grad():
                    _, ref_logp, _ = _forward(reference, seqs, pad, device)
                log_ratio = ref_logp - logp
                kl = A.masked_mean(torch.exp(log_ratio) - log_ratio - 1.0, token_mask)
                loss = loss + config.kl_coef * kl
                kls.append(float(kl.detach()))
            if token_mask.sum() > 0:
                loss.backward()
                clip_and_step(model, optimizer, scheduler, config.grad_clip, advance=False)
            else:
                optimizer.zero_grad(set_to_none=True)
            losses.append(float(loss.detach()))
            clip_fracs.append(float(clip_frac))
    mean = lambda xs: sum(xs) / len(xs) if xs else 0.0  # noqa: E731
    record.update({"loss": mean(losses), "clip_frac": mean(clip_fracs), "policy_frozen": policy_frozen,
                   "lr": scheduler.get_last_lr()[0]})
    if value_losses:
        record["value_loss"] = mean(value_losses)
    if kls:
        record["kl"] = mean(kls)
    return record
