"""The ``local`` backend: any HF-format causal LM from a local directory, on the CPU.

Generation is a plain token loop with a KV cache rather than ``model.generate`` so that the
log-probability of every generated token is recorded exactly as the trainer will recompute it
(log-softmax of the raw logits, temperature 1), whatever temperature was used to sample.
It stops at EOS, at a stop string, or as soon as the text holds a complete ``Action:`` call.

Greedy answers are drafted by prompt lookup: the tokens that followed the latest earlier place where the text's last
few tokens stand (a thought quoting an element line, an action copying the numbers it quoted) are checked in one
forward pass, and every one the model would have chosen itself is taken; the answer is the same as one token a pass.
On a CPU a forward pass of one token costs about what one of ten costs (the pass is mostly overhead), so a copied
span comes almost for free. A model 512 or more wide runs in bfloat16 on a CPU that multiplies it in hardware (AMX,
AVX-512 BF16), which reads prompts faster (agent/README.md, "Measured").
``prompt_style`` is the agent.prompt style the checkpoint was trained on (its ``loupe.json``);
the rollout loop renders the policy's prompts in it.
"""

from __future__ import annotations

import inspect
import json
import re
import threading
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent.actions import parse_turn
from agent.policies.base import Policy, PolicyError, PolicyOutput

__all__ = ["LocalPolicy", "action_complete", "cpu_multiplies_bf16", "messages_as_text"]

_ACTION_LINE = re.compile(r"^[ \t]*action[ \t]*:", re.IGNORECASE | re.MULTILINE)
DRAFT_TOKENS = 8  # prompt-lookup tokens checked a forward pass
RECENT_ANSWERS = 16  # the policy's latest answers, searched for drafts too
BF16_MIN_WIDTH = 512  # narrower models' passes are Python overhead: float32 keeps their logprobs exact


def draft(context: list[int], answer_start: int, limit: int = DRAFT_TOKENS, longest: int = 3,
          recent: Sequence[list[int]] = ()) -> list[int]:
    """Prompt lookup: up to ``limit`` tokens that followed an earlier occurrence of ``context``'s last n tokens, for
    the longest n (up to ``longest``) that occurs before. Searched in order: the answer so far
    (``context[answer_start:]``), latest occurrence first (an action copies the numbers its thought just quoted); the
    policy's ``recent`` answers, latest first (the grammar's words and a task's phrasing recur from step to step);
    then the prompt, first occurrence first (the lines that matter come first: a Named: line stands under the task).
    [] when none occurs."""
    for n in range(min(longest, len(context) - 1), 0, -1):
        tail = context[-n:]
        last = len(context) - n - 1  # the latest start of an occurrence before the tail itself
        start = next((s for s in range(last, answer_start - 1, -1) if context[s:s + n] == tail), None)
        if start is not None:
            return context[start + n:start + n + limit]
        for earlier in reversed(recent):
            start = next((s for s in range(len(earlier) - n - 1, -1, -1) if earlier[s:s + n] == tail), None)
            if start is not None:
                return earlier[start + n:start + n + limit]
        start = next((s for s in range(0, min(answer_start, last + 1)) if context[s:s + n] == tail), None)
        if start is not None:
            return context[start + n:start + n + limit]
    return []


def cpu_multiplies_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 matrices in hardware: AMX tiles or AVX-512 BF16 (Sapphire Rapids and
    later, Cooper Lake, Zen 4). oneDNN's own test (``torch.ops.mkldnn._is_mkldnn_bf16_supported``) also says yes
    for plain AVX-512, where bfloat16 is converted to float32 around every product: a 576-wide linear layer over 512
    rows took 27.2 ms in bfloat16 against 6.4 ms in float32 on such a CPU (an Ice Lake Xeon, one thread)."""
    import torch

    try:
        capabilities = torch.cpu.get_capabilities()
    except (AttributeError, RuntimeError):
        return False
    return bool(capabilities.get("amx_bf16") or capabilities.get("avx512_bf16"))


def _bf16_fits(model) -> bool:
    width = getattr(model.config.get_text_config(), "hidden_size", 0) or 0
    return width >= BF16_MIN_WIDTH and cpu_multiplies_bf16()


def action_complete(text: str) -> bool:
    """True once ``text`` ends in an ``Action:`` line that parses (nothing useful can follow)."""
    if not _ACTION_LINE.search(text):
        return False
    return not parse_turn(text).is_void


def messages_as_text(messages: list[dict]) -> list[dict]:
    """The messages with list contents (text + image parts) flattened to their text."""
    flat = []
    for message in messages:
        content = message.get("content", "")
        if isinstance(content, list):
            content = "\n".join(part.get("text", "") for part in content if part.get("type") == "text")
        flat.append({"role": message["role"], "content": content})
    return flat


def _prompt_style(path: Path) -> str:
    """The prompt style a checkpoint reads: ``prompt_style`` of its loupe.json, else full."""
    try:
        return json.loads((path / "loupe.json").read_text()).get("prompt_style") or "full"
    except (OSError, ValueError, AttributeError):
        return "full"


class LocalPolicy(Policy):
    name = "local"

    def __init__(
        self,
        checkpoint_dir: str | Path,
        temperature: float = 0.0,
        max_new_tokens: int = 96,
        seed: int | None = None,
        *,
        stop: tuple[str, ...] = (),
        stop_at_action: bool = True,
        timeout_s: float = 120.0,
        num_threads: int | None = None,
    ) -> None:
        self.temperature = temperature
        self.max_new_tokens = max_new_tokens
        self.seed = seed
        self.stop = tuple(stop)
        self.stop_at_action = stop_at_action
        self.timeout_s = timeout_s
        self._lock = threading.Lock()  # act() and reload() never interleave
        if num_threads:
            import torch

            torch.set_num_threads(num_threads)
        self._generator: Any = None
        self._recent: deque[list[int]] = deque(maxlen=RECENT_ANSWERS)  # token ids of the latest answers (drafts)
        self.reload(checkpoint_dir)

    def reload(self, checkpoint_dir: str | Path) -> None:
        """Swap in the weights of another checkpoint without a new process."""
        model, tokenizer = self._load(Path(checkpoint_dir))
        with self._lock:
            self.model, self.tokenizer = model, tokenizer
            self.prompt_style = _prompt_style(Path(checkpoint_dir))
            self.checkpoint_dir = Path(checkpoint_dir)
            self.model_name = str(checkpoint_dir)
            self._recent.clear()  # another model's answers (its tokenizer's ids) say nothing of this one's
            import torch

            self._generator = torch.Generator().manual_seed(self.seed) if self.seed is not None else None

    @staticmethod
    def _load(path: Path) -> tuple[Any, Any]:
        if not (path / "config.json").is_file():
            raise PolicyError(f"no HF checkpoint at {path} (config.json missing)")
        from transformers import AutoModelForCausalLM, AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
            model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
        except Exception as exc:  # noqa: BLE001 - any loader failure is a bad checkpoint for us
            raise PolicyError(f"could not load the checkpoint at {path}: {exc}") from exc
        if not getattr(tokenizer, "chat_template", None):
            raise PolicyError(f"the tokenizer at {path} has no chat_template; the policy needs one")
        if _bf16_fits(model):
            import torch

            model = model.to(torch.bfloat16)
        model.eval()
        return model, tokenizer

    def act(self, messages: list[dict], *, temperature: float | None = None) -> PolicyOutput:
        started = time.perf_counter()
        try:
            with self._lock:
                text, ids, logprobs, ends, tops = self._generate(
                    messages, started, self.temperature if temperature is None else temperature)
            return PolicyOutput(text=text, token_ids=ids, token_logprobs=logprobs, model=self.model_name,
                                latency_ms=(time.perf_counter() - started) * 1000, token_ends=ends,
                                top_logprobs=tops)
        except Exception as exc:  # noqa: BLE001 - act() reports, it does not raise
            return PolicyOutput(text="", model=getattr(self, "model_name", ""),
                                latency_ms=(time.perf_counter() - started) * 1000,
                                error=f"local generation failed: {type(exc).__name__}: {exc}")

    def prompt_ids(self, messages: list[dict]) -> list[int]:
        """The prompt token ids exactly as ``act`` feeds them (the trainer may reuse this)."""
        prompt = self.tokenizer.apply_chat_template(
            messages_as_text(messages), add_generation_prompt=True, tokenize=False
        )
        return list(self.tokenizer(prompt, add_special_tokens=False)["input_ids"])

    def _generate(self, messages: list[dict], started: float,
                  temperature: float) -> tuple[str, list[int], list[float], list[int], list[list[float]]]:
        """The answer's text, token ids and logprobs, where each token ends in the text, and the two best logprobs
        at each token's place (the runner-up gives the confidence's margin)."""
        import torch

        model, tokenizer = self.model, self.tokenizer
        prompt = self.prompt_ids(messages)
        limit = getattr(model.config, "max_position_embeddings", None)
        if limit and len(prompt) + self.max_new_tokens > limit:
            prompt = prompt[-(limit - self.max_new_tokens):]  # keep the latest context
        eos = tokenizer.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None}
        greedy = not (temperature and temperature > 0)
        ids: list[int] = []
        logprobs: list[float] = []
        ends: list[int] = []
        tops: list[list[float]] = []
        past = None
        # transformers renamed past_key_values to cache (5.x); speak whichever this model takes.
        cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        feed = list(prompt)  # tokens the next pass reads: the prompt, then the last token and a draft
        done = False
        with torch.inference_mode():
            while not done and len(ids) < self.max_new_tokens:
                guess = draft(prompt + ids, len(prompt), min(DRAFT_TOKENS, self.max_new_tokens - len(ids) - 1),
                              recent=self._recent) if greedy and ids else []
                out = model(input_ids=torch.tensor([feed + guess], dtype=torch.long), use_cache=True,
                            **{cache_arg: past})
                past = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
                rows = out.logits[0, len(feed) - 1:].float()
                taken = 0
                for position in range(len(guess) + 1):
                    logits = rows[position]
                    log_probs = torch.log_softmax(logits, dim=-1)
                    if greedy:
                        token = int(torch.argmax(logits).item())
                    else:
                        probs = torch.softmax(logits / temperature, dim=-1)
                        token = int(torch.multinomial(probs, 1, generator=self._generator).item())
                    ids.append(token)
                    logprobs.append(float(log_probs[token].item()))
                    tops.append([float(v) for v in torch.topk(log_probs, 2).values.tolist()])
                    taken += 1
                    text = tokenizer.decode(ids, skip_special_tokens=True)
                    ends.append(len(text))
                    if token in eos_ids or any(s in text for s in self.stop) or \
                            (self.stop_at_action and action_complete(text)) or len(ids) >= self.max_new_tokens:
                        done = True
                        break
                    if position == len(guess) or guess[position] != token:
                        break  # the draft's next token was not the model's: what follows it was read for nothing
                if time.perf_counter() - started > self.timeout_s:
                    raise TimeoutError(f"generation took over {self.timeout_s} s")
                if len(guess) >= taken:  # the pass read draft tokens past the last one taken: forget them
                    past.crop(taken - len(guess) - 1)  # (transformers 5: a negative count of tokens to drop)
                feed = [ids[-1]]
        self._recent.append(ids)
        text = tokenizer.decode(ids, skip_special_tokens=True)
        for s in self.stop:
            if s in text:
                text = text[: text.index(s)]
        return text, ids, logprobs, ends, tops
