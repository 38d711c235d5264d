"""The ``openai`` backend: any OpenAI-compatible chat server (vLLM in production).

Plain ``urllib`` (no extra dependency). Connection errors, timeouts, HTTP 429 and 5xx are retried
with exponential backoff; other HTTP errors are not (they will not get better). The last error's
text ends up in ``PolicyOutput.error``. Each attempt is bounded by ``timeout`` seconds, so a call
takes at most about ``(retries + 1) * timeout`` plus the backoff sleeps.

Token ids: OpenAI returns token strings only. vLLM returns ids when asked, e.g.
``extra_body={"return_tokens_as_token_ids": True}``, as tokens spelled ``token_id:123``; those
are parsed into ``token_ids``.

Confidence: each answer asks for ``top_logprobs`` (``top_k``, 2 by default: the runner-up gives the margin);
where each token ends in the text is summed from the token strings (not known for ``token_id:`` tokens, and then
the confidence scores the whole answer only when it has no ``Action:`` line, see agent.confidence).
"""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.error
import urllib.request
from typing import Any

from agent.policies.base import Policy, PolicyOutput

__all__ = ["OpenAIPolicy"]


class _Retryable(Exception):
    pass


class OpenAIPolicy(Policy):
    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 30,
        retries: int = 3,
        *,
        temperature: float = 0.0,
        max_tokens: int = 96,
        backoff_s: float = 0.5,
        extra_body: dict | None = None,
        top_k: int = 2,
    ) -> None:
        root = base_url.rstrip("/")
        if root.endswith("/v1"):
            root = root[: -len("/v1")]
        self.url = f"{root}/v1/chat/completions"
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.backoff_s = backoff_s
        self.extra_body = dict(extra_body or {})
        self.top_k = top_k

    def act(self, messages: list[dict], *, temperature: float | None = None) -> PolicyOutput:
        started = time.perf_counter()
        body = {
            "model": self.model, "messages": messages,
            "temperature": self.temperature if temperature is None else temperature,
            "max_tokens": self.max_tokens, "logprobs": True,
            **({"top_logprobs": self.top_k} if self.top_k else {}), **self.extra_body,
        }
        error = "no attempt made"
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                reply = self._post(body)
                return self._output(reply, started)
            except _Retryable as exc:
                error = str(exc)
            except Exception as exc:  # noqa: BLE001 - act() reports, it does not raise
                error = str(exc)
                break
        return PolicyOutput(text="", model=self.model, latency_ms=(time.perf_counter() - started) * 1000,
                            error=f"{error} (after {attempt + 1} attempt{'s' if attempt else ''} to {self.url})")

    def _post(self, body: dict) -> dict:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:300]
            message = f"HTTP {exc.code} from the policy server: {detail}"
            if exc.code == 429 or exc.code >= 500:
                raise _Retryable(message) from exc
            raise RuntimeError(message) from exc
        except (socket.timeout, TimeoutError) as exc:
            raise _Retryable(f"the policy server did not answer within {self.timeout} s") from exc
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, (socket.timeout, TimeoutError)):
                raise _Retryable(f"the policy server did not answer within {self.timeout} s") from exc
            raise _Retryable(f"cannot reach the policy server: {exc.reason}") from exc
        except (ConnectionError, http.client.HTTPException) as exc:
            raise _Retryable(f"connection to the policy server failed: {exc}") from exc
        except json.JSONDecodeError as exc:
            raise RuntimeError(f"the policy server sent invalid JSON: {exc}") from exc

    def _output(self, reply: dict, started: float) -> PolicyOutput:
        try:
            choice = reply["choices"][0]
            text = choice["message"]["content"] or ""
        except (KeyError, IndexError, TypeError) as exc:
            raise RuntimeError(f"unexpected reply shape from the policy server: {str(reply)[:200]}") from exc
        entries: list[dict[str, Any]] = ((choice.get("logprobs") or {}).get("content")) or []
        logprobs = [float(entry.get("logprob", 0.0)) for entry in entries]
        ids = []
        for entry in entries:
            token = str(entry.get("token", ""))
            if token.startswith("token_id:") and token[len("token_id:"):].isdigit():
                ids.append(int(token[len("token_id:"):]))
        if len(ids) != len(logprobs):
            ids = []  # only plain token strings: ids unknown
        ends: list[int] = []
        if not ids:  # token strings: where each ends in the text
            for entry in entries:
                ends.append((ends[-1] if ends else 0) + len(str(entry.get("token", ""))))
        tops = [sorted((float(t.get("logprob", 0.0)) for t in (entry.get("top_logprobs") or [])
                       if isinstance(t, dict)), reverse=True) for entry in entries]
        return PolicyOutput(text=text, token_ids=ids, token_logprobs=logprobs, model=reply.get("model", self.model),
                            latency_ms=(time.perf_counter() - started) * 1000, token_ends=ends,
                            top_logprobs=tops if any(tops) else [])

