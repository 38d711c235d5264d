"""Continuous batching of one text model on the CPU, for the host's policy server (trainer/serve.py is its HTTP side).

Concurrent requests are decoded together, each with its own row of the batch's KV cache: a pass feeds every greedy
request's last token and the tokens prompt lookup drafts after it (LocalPolicy's drafts), and takes each drafted
token the model would have chosen, so a batch answers in about as few passes as a lone request; a finished request
leaves the batch at once, so a new one never waits for the slowest to end. An episode's next
prompt is its last prompt with a turn more (agent.prompt.render_messages), so the KV cache of every answered request
is kept (:class:`PrefixCache`) and a new prompt reads only the tokens past the longest cached prefix it starts with:
a step reads its new screen, not the whole history again. Greedy answers are the tokens LocalPolicy picks (raw
logits' argmax); every token's logprob is the log-softmax of the raw logits (temperature 1), as the trainer
recomputes it.
"""

from __future__ import annotations

import inspect
import logging
import os
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from agent.policies.local import DRAFT_TOKENS, RECENT_ANSWERS, action_complete, draft

MAX_BATCH = 16  # requests decoded together; more wait for a place
MAX_TOP_LOGPROBS = 20  # OpenAI's limit
MIN_REUSE = 16  # cached prefix tokens worth a copy (a shared system prompt is about a hundred)
# Once a request has decoded for STARVED_S seconds, prompts are read one every STARVED_PASSES passes (else all that
# wait, before the next pass): an answer that drafts badly is not left a pass per prompt read while the others come and
# go (bench policy, 8 episodes at once: p95 5.1-5.5 s against 7.3-8.0, p50 3.3-3.6 against 2.0-2.2, the same answers a
# second; no change at 4).
STARVED_S = 2.0
STARVED_PASSES = 4
COMPACT_ABOVE = 64  # masked columns (rejected drafts) a batch's cache carries before its rows are compacted
PREFIX_CACHE_MB = int(os.environ.get("LOUPE_PREFIX_CACHE_MB", "256"))

log = logging.getLogger("trainer")


class PromptTooLong(ValueError):
    """A prompt the model cannot read whole."""


@dataclass
class Request:
    prompt: list[int]
    max_tokens: int
    temperature: float
    top_k: int  # alternatives to report at each token (0: none)
    stop: tuple[str, ...]
    deadline: float
    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    tops: list[list[tuple[int, float]]] = field(default_factory=list)
    text: str = ""
    error: str | None = None
    reused: int = 0  # prompt tokens whose KV came from the prefix cache
    joined: float = 0.0  # when it joined the batch (time.monotonic)
    cancelled: bool = False  # its client went away: it leaves the batch at the next pass
    done: threading.Event = field(default_factory=threading.Event)


class PrefixCache:
    """The KV caches of recently answered requests, keyed by the tokens they hold, least recently used first out
    past ``budget_mb``. ``take(prompt)`` gives the longest cached prefix of a prompt (one token short of it at most:
    the last prompt token is read to get the first answer token's logits)."""

    def __init__(self, budget_mb: int = PREFIX_CACHE_MB) -> None:
        self.budget = budget_mb * 2**20
        self._entries: OrderedDict[int, tuple[list[int], list[tuple]]] = OrderedDict()
        self._bytes: dict[int, int] = {}
        self._next = 0
        self.hits = self.reused_tokens = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size_bytes(self) -> int:
        return sum(self._bytes.values())

    def take(self, prompt: list[int]) -> tuple[int, list[tuple] | None]:
        """(n, per-layer (keys, values) of the prompt's first n tokens), or (0, None). An entry the prompt extends
        whole is handed over (the request will leave a longer one); a shared shorter part is copied."""
        best, best_n = None, 0
        for key, (tokens, _) in self._entries.items():
            n = _common_prefix(tokens, prompt, len(prompt) - 1)
            if n > best_n:
                best, best_n = key, n
        if best is None or best_n < MIN_REUSE:
            return 0, None
        tokens, layers = self._entries[best]
        if best_n == len(tokens):
            del self._entries[best]
            self._bytes.pop(best)
        else:
            self._entries.move_to_end(best)
            layers = [(k[:, :, :best_n].clone(), v[:, :, :best_n].clone()) for k, v in layers]
        self.hits += 1
        self.reused_tokens += best_n
        return best_n, layers

    def put(self, tokens: list[int], layers: list[tuple]) -> None:
        """Keep ``layers`` (per layer [1, heads, len(tokens), dim] keys and values) as the KV of ``tokens``."""
        size = sum(k.nelement() * k.element_size() + v.nelement() * v.element_size() for k, v in layers)
        if len(tokens) < MIN_REUSE or size > self.budget:
            return
        self._entries[self._next], self._bytes[self._next] = (list(tokens), layers), size
        self._next += 1
        total = self.size_bytes
        while total > self.budget:
            key, _ = self._entries.popitem(last=False)
            total -= self._bytes.pop(key)


def _common_prefix(a: list[int], b: list[int], limit: int) -> int:
    n = min(len(a), len(b), limit)
    if a[:n] == b[:n]:  # the usual case (the prompt extends an entry) in one comparison
        return n
    low, high = 0, n  # a[:low] == b[:low], a[:high] != b[:high]
    while high - low > 1:
        mid = (low + high) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid
    return low


class Batcher:
    """Continuous batching of one text model: a request's prompt is read alone (past its cached prefix) into its
    own KV cache, which then joins the batch's (left-padded to the longest, an attention mask hiding the padding);
    each pass decodes at least one token of every request in the batch, more where its drafted tokens hold."""

    def __init__(self, policy, timeout_s: float = 120.0, prefix_cache_mb: int = PREFIX_CACHE_MB) -> None:
        import torch

        self.policy, self.timeout_s = policy, timeout_s
        self.model, self.tokenizer = policy.model, policy.tokenizer
        eos = self.tokenizer.eos_token_id
        self.eos = set(eos if isinstance(eos, list) else [eos]) - {None}
        self.limit = getattr(self.model.config, "max_position_embeddings", None)
        self._cache_arg = _cache_arg_of(self.model)
        self.passes = self.largest_batch = 0  # decoding passes made, and the most requests one of them decoded
        self.compactions = 0  # times the rows' kept columns were moved together (:meth:`_compact`)
        self.prefixes = PrefixCache(prefix_cache_mb)
        self._recent: deque[list[int]] = deque(maxlen=RECENT_ANSWERS)  # the latest answers, searched for drafts
        self._closed = False
        self._waiting: list[Request] = []
        self._active: list[Request] = []
        self._cache = None
        self._mask = torch.zeros((0, 0), dtype=torch.long)
        self._wake = threading.Condition()
        self._thread = threading.Thread(target=self._loop, name="loupe-batcher", daemon=True)
        self._thread.start()

    def generate(self, prompt: list[int], *, max_tokens: int, temperature: float, top_k: int = 0,
                 stop: tuple[str, ...] = ()) -> Request:
        """The answer to one prompt (its ``error`` set when generation failed), decoded beside the others."""
        request = self.submit(prompt, max_tokens=max_tokens, temperature=temperature, top_k=top_k, stop=stop)
        request.done.wait()
        return request

    def submit(self, prompt: list[int], *, max_tokens: int, temperature: float, top_k: int = 0,
               stop: tuple[str, ...] = ()) -> Request:
        """Queue one prompt; its ``done`` is set once answered. A prompt the model cannot read whole raises
        :class:`PromptTooLong`; one that leaves less room than ``max_tokens`` is answered in the room left."""
        if self.limit and len(prompt) >= self.limit:
            raise PromptTooLong(f"the prompt is {len(prompt)} tokens; this model reads at most {self.limit} "
                                "(prompt and answer together)")
        if self.limit:
            max_tokens = min(max_tokens, self.limit - len(prompt))
        request = Request(prompt=prompt, max_tokens=max_tokens, temperature=temperature, top_k=top_k, stop=stop,
                          deadline=time.monotonic() + self.timeout_s)
        with self._wake:
            self._waiting.append(request)
            self._wake.notify()
        return request

    def close(self) -> None:
        """Stop the loop (an unloaded model): requests it holds are answered first."""
        with self._wake:
            self._closed = True
            self._wake.notify()

    def _loop(self) -> None:
        import torch

        while True:
            with self._wake:
                while not self._waiting and not self._active and not self._closed:
                    self._wake.wait()
                if self._closed and not self._active:
                    for request in self._waiting:
                        request.error = "the model was unloaded"
                        request.done.set()
                    return
                room = MAX_BATCH - len(self._active)
                if self._active and time.monotonic() - min(r.joined for r in self._active) > STARVED_S:
                    room = min(room, 1 if self.passes % STARVED_PASSES == 0 else 0)  # a new prompt waits 3 passes
                joining, self._waiting = self._waiting[:room], self._waiting[room:]
            try:
                with torch.inference_mode():
                    for request in joining:
                        if request.cancelled:
                            request.error = "the client went away"
                            request.done.set()
                        else:
                            self._join(request)
                    if self._active:
                        self._step()
            except Exception as exc:  # noqa: BLE001 - every waiting client hears of it; the server goes on
                log.exception("batched generation failed")
                for request in [*self._active, *joining]:
                    if not request.done.is_set():
                        request.error = f"{type(exc).__name__}: {exc}"
                        request.done.set()
                self._active, self._cache = [], None
                self._mask = torch.zeros((0, 0), dtype=torch.long)

    def _forward(self, **inputs):
        # transformers renamed past_key_values to cache (5.x); speak whichever this model takes.
        out = self.model(use_cache=True, **inputs)
        return out.logits, getattr(out, "cache", None) or getattr(out, "past_key_values", None)

    def _join(self, request: Request) -> None:
        """Read the prompt past its cached prefix, take its first token, and put its KV cache into the batch's."""
        import torch
        from transformers import DynamicCache

        reused, layers = self.prefixes.take(request.prompt)
        request.reused, request.joined = reused, time.monotonic()
        inputs: dict = {"input_ids": torch.tensor([request.prompt[reused:]], dtype=torch.long)}
        if layers is not None:
            inputs[self._cache_arg] = DynamicCache(ddp_cache_data=layers, config=self.model.config)
            inputs["position_ids"] = torch.arange(reused, len(request.prompt)).unsqueeze(0)
        logits, cache = self._forward(**inputs)
        if self._take(request, logits[0, -1]):
            self.prefixes.put(request.prompt, [(layer.keys, layer.values) for layer in cache.layers])
            return
        length, joined = self._mask.shape[1], len(request.prompt)
        width = max(length, joined)
        mask = torch.ones((1, joined), dtype=torch.long)
        if self._cache is None:
            self._cache, self._mask = cache, mask
        else:
            for ours, theirs in zip(self._cache.layers, cache.layers):
                ours.keys = torch.cat([_pad_left(ours.keys, width - length), _pad_left(theirs.keys, width - joined)])
                ours.values = torch.cat([_pad_left(ours.values, width - length),
                                         _pad_left(theirs.values, width - joined)])
            self._mask = torch.cat([_pad_left(self._mask, width - length), _pad_left(mask, width - joined)])
        self._active.append(request)

    def _step(self) -> None:
        """One pass over every request in the batch. Each greedy request feeds its last token and the tokens prompt
        lookup drafts after it (as LocalPolicy drafts: its own answer so far, the latest answers, the prompt), and
        takes every drafted token the model would have chosen itself, so a batch answers in fewer passes as a lone
        request does; a sampled request feeds its last token alone. The fed tokens whose next token was not taken stay
        in the cache behind a zero in the attention mask (their columns are dropped once no row holds them, and a
        row's holes compacted away once they add up: :meth:`_compact`)."""
        import torch

        active = self._active
        self.passes += 1
        self.largest_batch = max(self.largest_batch, len(active))
        guesses = [self._guess(request) for request in active]
        width, length = 1 + max(len(guess) for guess in guesses), self._mask.shape[1]
        feed, positions, fed = [], [], []
        for request, guess in zip(active, guesses):
            filler = width - 1 - len(guess)  # a shorter row repeats its last token behind a zero in the mask
            start = len(request.prompt) + len(request.ids) - 1
            feed.append([request.ids[-1], *guess, *[request.ids[-1]] * filler])
            positions.append(list(range(start, start + width)))
            fed.append([1] * (1 + len(guess)) + [0] * filler)
        self._mask = torch.cat([self._mask, torch.tensor(fed, dtype=torch.long)], dim=1)
        logits, self._cache = self._forward(input_ids=torch.tensor(feed, dtype=torch.long),
                                            attention_mask=self._mask, position_ids=torch.tensor(positions),
                                            **{self._cache_arg: self._cache})
        finished, held = [], []
        for row, (request, guess) in enumerate(zip(active, guesses)):
            if request.cancelled:
                finished.append(self._cancel(request))
                held.append(0)
                continue
            taken, done = 0, False
            for position in range(len(guess) + 1):
                done = self._take(request, logits[row, position])
                taken += 1
                if done or position == len(guess) or guess[position] != request.ids[-1]:
                    break
            finished.append(done)
            held.append(taken)  # the fed tokens whose next token was taken
        for row, taken in enumerate(held):
            self._mask[row, length + taken:] = 0  # columns no row holds any more go at _compact
        for row, request in enumerate(active):
            if finished[row] and not request.cancelled and request.error is None:
                count = len(request.prompt) + len(request.ids) - 1  # the fed tokens: the prompt and all but the last
                columns = self._mask[row].nonzero().squeeze(1)[-count:]
                self.prefixes.put((request.prompt + request.ids)[:count],
                                  [(layer.keys[row:row + 1, :, columns], layer.values[row:row + 1, :, columns])
                                   for layer in self._cache.layers])
        if not any(finished):
            self._compact()
            return
        keep = [row for row, gone in enumerate(finished) if not gone]
        self._active = [active[row] for row in keep]
        if not keep:
            self._cache, self._mask = None, torch.zeros((0, 0), dtype=torch.long)
            return
        index = torch.tensor(keep, dtype=torch.long)
        self._mask = self._mask[index]
        for layer in self._cache.layers:
            layer.keys, layer.values = layer.keys[index], layer.values[index]
        self._compact()

    def _guess(self, request: Request) -> list[int]:
        """The tokens prompt lookup drafts after a greedy request's answer so far (none for a sampled one)."""
        if request.temperature > 0 or request.cancelled:
            return []
        return draft(request.prompt + request.ids, len(request.prompt),
                     max(0, min(DRAFT_TOKENS, request.max_tokens - len(request.ids) - 1)), recent=self._recent)

    def _compact(self) -> None:
        """Drop the columns every row masks (a left request's padding), and once the rows' holes (rejected drafts)
        come to ``COMPACT_ABOVE`` columns or more, move each row's kept columns to the right end, in order. The keys
        keep the positions they were computed at (``position_ids``), so moving them changes no answer."""
        import torch

        used = (self._mask.sum(dim=0) > 0).nonzero()
        first, last = int(used[0]), int(used[-1]) + 1
        if first > 0 or last < self._mask.shape[1]:
            self._mask = self._mask[:, first:last]
            for layer in self._cache.layers:
                layer.keys, layer.values = layer.keys[:, :, first:last], layer.values[:, :, first:last]
        counts = self._mask.sum(dim=1)
        width = int(counts.max())
        if self._mask.shape[1] - width < COMPACT_ABOVE:
            return
        rows = self._mask.shape[0]
        index = torch.zeros((rows, width), dtype=torch.long)
        mask = torch.zeros((rows, width), dtype=torch.long)
        for row in range(rows):
            kept = self._mask[row].nonzero().squeeze(1)
            index[row, width - len(kept):] = kept
            mask[row, width - len(kept):] = 1
        self._mask = mask
        self.compactions += 1
        for layer in self._cache.layers:
            gather = index[:, None, :, None].expand(-1, layer.keys.shape[1], -1, layer.keys.shape[3])
            layer.keys, layer.values = layer.keys.gather(2, gather), layer.values.gather(2, gather)

    @staticmethod
    def _cancel(request: Request) -> bool:
        request.error = "the client went away"
        request.done.set()
        return True

    def _take(self, request: Request, logits) -> bool:
        """Choose the request's next token from its logits; True when the request is finished (and answered)."""
        import torch

        logits = logits.float()
        log_probs = torch.log_softmax(logits, dim=-1)
        if request.temperature > 0:
            token = int(torch.multinomial(torch.softmax(logits / request.temperature, dim=-1), 1).item())
        else:
            token = int(torch.argmax(logits).item())
        request.ids.append(token)
        request.logprobs.append(float(log_probs[token]))
        if request.top_k:
            best = torch.topk(log_probs, request.top_k)
            request.tops.append(list(zip(best.indices.tolist(), best.values.tolist())))
        request.text = self.tokenizer.decode(request.ids, skip_special_tokens=True)
        if (token in self.eos or len(request.ids) >= request.max_tokens or any(s in request.text for s in request.stop)
                or (self.policy.stop_at_action and action_complete(request.text))):
            self._recent.append(request.ids)
            request.done.set()
            return True
        if time.monotonic() > request.deadline:
            request.error = f"generation took over {self.timeout_s} s"
            request.done.set()
            return True
        return False


def _pad_left(tensor, n: int):
    """``tensor`` ([batch, ..., length] for a mask, [batch, heads, length, dim] for keys) with ``n`` zero positions
    before its first."""
    import torch

    if n == 0:
        return tensor
    if tensor.dim() == 2:
        return torch.cat([tensor.new_zeros((tensor.shape[0], n)), tensor], dim=1)
    return torch.cat([tensor.new_zeros((*tensor.shape[:2], n, tensor.shape[3])), tensor], dim=2)


def _cache_arg_of(model) -> str:
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
