"""Direct preference optimization on prompt / chosen / rejected rows.

The reference is the init checkpoint, frozen. The chosen completion is the person's correction,
the rejected one the model's proposal it replaced. Logged: loss, the implicit-reward margin
(chosen minus rejected, what DPO pushes up) and the accuracy (share of pairs with margin > 0).
"""

from __future__ import annotations

import copy
import logging
import random

import torch

from trainer import data as D
from trainer.configs import DPOConfig, config_dict
from trainer.core_algos import dpo_loss
from trainer.model import (TrainerError, load, resolve_device, resolve_dtype, save_checkpoint, sha256_file,
                           training_prompt_style)
from trainer.optim import (Timer, clip_and_step, emit, log_interval, make_optimizer, planned_steps, set_seed,
                           set_threads, stop_report)
from trainer.vlm import is_vlm, train_dpo_vlm

log = logging.getLogger("trainer")


def sequence_logps(model, examples: list[D.Example], pad_id: int, device) -> torch.Tensor:
    """Summed completion log-probability of each example. Returns [B]."""
    batch = {k: v.to(device) for k, v in D.collate(examples, pad_id).items()}
    logp, _ = D.token_logprobs(model, batch)
    return logp.sum(-1)


def pair_examples(tokenizer, rows: list[D.DPORow], max_length: int) -> list[tuple[D.Example, D.Example]]:
    """(chosen, rejected) token examples of every row, labels on the completion only."""
    return [(D.completion_example(tokenizer, r.prompt, r.chosen, max_length),
             D.completion_example(tokenizer, r.prompt, r.rejected, max_length)) for r in rows]


@torch.no_grad()
def logp_margins(model, pairs, pad_id: int, device) -> torch.Tensor:
    """logp(chosen) - logp(rejected) of every pair under ``model`` alone. Returns [N]."""
    out = []
    for chosen, rejected in pairs:
        logps = sequence_logps(model, [chosen, rejected], pad_id, device)
        out.append(logps[0] - logps[1])
    return torch.stack(out)


def train_dpo(config: DPOConfig) -> dict:
    """Train ``config.init`` on the pairs in ``config.data``; save to ``config.out``. Returns metrics."""
    if is_vlm(config.init):  # a vision-language checkpoint: TRL's trainer (trainer/vlm.py)
        return train_dpo_vlm(config)
    if not config.out:
        raise TrainerError("--out is required: the dir to write the checkpoint to")
    set_threads(config.threads)
    rng = set_seed(config.seed)
    rows = D.read_dpo(config.data, init=config.init, action_format=config.action_format)
    device = resolve_device(config.device)
    dtype = resolve_dtype(config.dtype, device)
    loaded = load(config.init, device=device, dtype=dtype, lora=config.lora, seed=config.seed)
    model, tokenizer = loaded.model, loaded.tokenizer
    if loaded.is_lora:
        reference = None  # the adapter disabled is the reference, no second copy needed
    else:
        reference = copy.deepcopy(model).eval()
        reference.requires_grad_(False)
    prompts, restyled = D.restyle([row.prompt for row in rows], training_prompt_style(loaded, config.prompt_style))
    if restyled:
        log.info("dpo: %d of %d prompts re-rendered in the %s prompt style", restyled, len(rows), loaded.prompt_style)
    rows = [D.DPORow(prompt, row.chosen, row.rejected) for prompt, row in zip(prompts, rows)]
    pairs = pair_examples(tokenizer, rows, config.max_length)
    pad = tokenizer.pad_token_id
    lengths = [max(len(c), len(r)) * 2 for c, r in pairs]
    log.info("dpo: %d pairs, device %s", len(pairs), device)

    def ref_logps(examples):
        with torch.no_grad():
            if reference is not None:
                return sequence_logps(reference, examples, pad, device)
            with model.disable_adapter():
                return sequence_logps(model, examples, pad, device)

    logp_before = logp_margins(model, pairs, pad, device)
    planned = planned_steps(config, len(D.length_batches(lengths, config.batch_tokens, random.Random(0))))
    optimizer, scheduler = make_optimizer(model.parameters(), config, total=planned)
    every = log_interval(config, planned)
    timer = Timer()
    batches: list[list[int]] = []
    history: list[dict] = []
    timed_out = False
    for step in range(planned):
        if config.max_seconds and timer.elapsed() > config.max_seconds:
            timed_out = True
            break
        if not batches:
            batches = D.length_batches(lengths, config.batch_tokens, rng)
        picked = [pairs[i] for i in batches.pop()]
        examples = [c for c, _ in picked] + [r for _, r in picked]
        model.train()
        logps = sequence_logps(model, examples, pad, device)
        ref = ref_logps(examples)
        n = len(picked)
        loss, chosen_r, rejected_r = dpo_loss(logps[:n], logps[n:], ref[:n], ref[n:], config.beta)
        if config.sft_weight > 0:
            chosen_tokens = sum(sum(1 for t in c.labels if t != D.IGNORE) for c, _ in picked)
            loss = loss + config.sft_weight * (-logps[:n].sum() / max(chosen_tokens, 1))
        loss.backward()
        clip_and_step(model, optimizer, scheduler, config.grad_clip)
        margin = chosen_r - rejected_r
        history.append({"loss": float(loss.detach()), "margin": float(margin.mean()),
                        "accuracy": float((margin > 0).float().mean())})
        if (step + 1) % every == 0 or step + 1 == planned:
            recent = history[-every:]
            emit({"step": step + 1, "total": planned,
                  **{k: sum(h[k] for h in recent) / len(recent) for k in ("loss", "margin", "accuracy")},
                  "lr": scheduler.get_last_lr()[0]})
    model.eval()
    logp_after = logp_margins(model, pairs, pad, device)
    final_margins = (logp_after - logp_before) * config.beta  # == implicit reward margin vs the init
    metrics = {
        "algorithm": "dpo",
        "steps": len(history),
        "pairs": len(pairs),
        "first_loss": history[0]["loss"] if history else None,
        "final_loss": history[-1]["loss"] if history else None,
        "logp_margin_before": float(logp_before.mean()),
        "logp_margin_after": float(logp_after.mean()),
        "reward_margin": float(final_margins.mean()),
        "pairs_improved": float((logp_after > logp_before).float().mean()),
        "accuracy": float((logp_after > 0).float().mean()),
        "train_seconds": timer.elapsed(),
        "planned_steps": planned,
        **stop_report(config, steps=len(history), planned=planned, rows=len(pairs), what="pairs",
                      timed_out=timed_out),
    }
    save_checkpoint(loaded, config.out, algorithm="dpo", config=config_dict(config),
                    data_sha256=sha256_file(config.data), metrics=metrics)
    return metrics
