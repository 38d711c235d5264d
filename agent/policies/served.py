"""The ``served`` backend: a checkpoint answered by the host's one policy server (``python -m trainer serve``, which
``make run`` starts), instead of a copy of the model in every worker process.

The server batches the concurrent requests of all the host's rollout and live workers (trainer/serve.py, Batcher),
so the model is in memory once and its passes are shared. A checkpoint dir is loaded into the server on first use,
under a name made of its path, so every process asking for the same dir shares one copy; a server that restarted
or let the model go answers ``model_not_found``, and the model is loaded again once.

Token ids come back exact (vLLM's ``return_tokens_as_token_ids``: RL rows train on them); where each token ends in
the text is worked out here with the checkpoint's tokenizer, as LocalPolicy does, for the confidence."""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
from pathlib import Path

from agent.policies.base import PolicyOutput
from agent.policies.local import _prompt_style
from agent.policies.openai_compat import OpenAIPolicy

__all__ = ["ServedPolicy", "served_name"]


def served_name(checkpoint_dir: str | Path) -> str:
    """The name a checkpoint dir answers to on the host's server: the same dir, the same name, in every process."""
    path = str(Path(checkpoint_dir).resolve())
    return f"{Path(path).name[:40]}-{hashlib.sha256(path.encode()).hexdigest()[:12]}"


class ServedPolicy(OpenAIPolicy):
    name = "served"

    def __init__(self, base_url: str, checkpoint_dir: str | Path, *, timeout: float = 120, retries: int = 2,
                 temperature: float = 0.0, max_tokens: int = 96, top_k: int = 2) -> None:
        super().__init__(base_url, served_name(checkpoint_dir), timeout=timeout, retries=retries,
                         temperature=temperature, max_tokens=max_tokens, top_k=top_k,
                         extra_body={"return_tokens_as_token_ids": True})
        self.root = self.url.removesuffix("/v1/chat/completions")
        self.checkpoint_dir = Path(checkpoint_dir).resolve()
        self.model_name = str(checkpoint_dir)
        self.prompt_style = _prompt_style(self.checkpoint_dir)
        self._loaded = False
        self._tokenizer = None

    def act(self, messages: list[dict], *, temperature: float | None = None) -> PolicyOutput:
        try:
            if not self._loaded:
                self._load()
            output = super().act(messages, temperature=temperature)
            if output.error and "model_not_found" in output.error:  # the server restarted or let it go
                self._load()
                output = super().act(messages, temperature=temperature)
        except RuntimeError as exc:
            return PolicyOutput(text="", model=self.model, error=str(exc))
        if output.token_ids and not output.token_ends:
            output.token_ends = self._ends(output.token_ids)
        return output

    def _load(self) -> None:
        """Ask the server to load the checkpoint under its name (already loaded is a success)."""
        body = json.dumps({"lora_name": self.model, "lora_path": str(self.checkpoint_dir)}).encode()
        request = urllib.request.Request(f"{self.root}/v1/load_lora_adapter", data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=max(self.timeout, 300)):
                pass
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")
            if not (exc.code == 400 and "already been loaded" in detail):
                raise RuntimeError(f"the policy server at {self.root} could not load {self.checkpoint_dir} "
                                   f"(HTTP {exc.code}): {detail[:300]}") from None
        except OSError as exc:
            raise RuntimeError(f"cannot reach the host's policy server at {self.root} ({exc}); is it running "
                               "(make run starts it), and is LOUPE_POLICY_SERVER_URL its address?") from None
        self._loaded = True

    def _ends(self, ids: list[int]) -> list[int]:
        """Where each token ends in the decoded text, as LocalPolicy records it."""
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(str(self.checkpoint_dir), local_files_only=True)
        return [len(self._tokenizer.decode(ids[:i + 1], skip_special_tokens=True)) for i in range(len(ids))]
