"""An OpenAI-compatible HTTP server around agent's LocalPolicy (stdlib only).

Endpoints:
- ``GET  /v1/models``: the loaded models;
- ``POST /v1/chat/completions``: messages, temperature, max_tokens, logprobs (answered as
  ``choices[0].logprobs.content[i].logprob`` like OpenAI; with vLLM's ``return_tokens_as_token_ids``
  each token is written ``token_id:<id>``);
- ``POST /v1/load_lora_adapter`` ``{"lora_name", "lora_path"}`` and
  ``POST /v1/unload_lora_adapter`` ``{"lora_name"}``, shaped like vLLM's runtime LoRA loading, so
  a deployment can switch checkpoints without a restart. ``lora_path`` is a full checkpoint dir or
  a PEFT adapter dir (merged onto the served base checkpoint once, at load time). An adapter that does not fit
  the base (trainer/adapters.py: its tensors name modules or shapes the base lacks) or a checkpoint of the other
  kind (text for a vision-language base, or the reverse) is a 400 saying so, never a silently different model.
Errors are ``{"error": {"message", "type", "code"}}`` with a 4xx / 5xx status.

A vision-language checkpoint (its config.json has a ``vision_config``: Qwen2.5-VL, the tiny VLM of
trainer/tiny_vlm.py) is served by trainer/vlm_serve.py: its messages may hold image parts (``data:``
URLs only; a bad or oversized image is a 400 saying which), and it answers through the checkpoint's
own processor and chat template. Text checkpoints take string contents only, as before.

Text models are served by continuous batching on the CPU (trainer/batching.py): concurrent requests are decoded
together, each with its own KV cache, a greedy request taking every token prompt lookup drafts that the model would
choose (several a pass), and a prompt that starts with an earlier request's tokens (an episode's next step) reads
only what is new, so the rollout and live workers of a host share one copy of a model (``make run`` starts one such
server a host: LOUPE_POLICY_SERVER_URL). ``logprobs`` and ``top_logprobs`` (up to 20 alternatives a token) are
answered as OpenAI does. A prompt longer than the model's context is a 400; a client that goes away mid-answer leaves
the batch at the next pass, the others go on. A vision-language model serves one request at a time (a lock per
model). vLLM is the production path.
"""

from __future__ import annotations

import json
import logging
import select
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from agent.policies.base import PolicyOutput
from agent.prompt import DEFAULT_STYLE, restyle_messages
from trainer.adapters import adapter_mismatch
from trainer.batching import MAX_TOP_LOGPROBS, Batcher, PromptTooLong
from trainer.configs import ServeConfig, reads_images
from trainer.model import LOUPE_FILE, TrainerError, chat_ids, checkpoint_prompt_style
from trainer.optim import emit, set_threads

MAX_BODY_BYTES = 128 * 2**20  # a request of 16 screenshots at vlm_serve's 10 MB cap, base64, fits

log = logging.getLogger("trainer")


class APIError(Exception):
    """An error the client caused or should hear about, with its HTTP status."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind


@dataclass
class Served:
    """One model the server answers to."""

    name: str
    path: str  # what the client gave (checkpoint or adapter dir)
    policy: object
    tokenizer: object
    created: int = field(default_factory=lambda: int(time.time()))
    parent: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    vision: bool = False  # a vision-language model (trainer/vlm_serve.py): its messages may hold images
    batcher: Batcher | None = None  # a text model's continuous batching
    used: float = field(default_factory=time.monotonic)  # when it was last asked for (the least recent leaves first)


MAX_LOADED = 4  # models loaded at run time kept at once (besides the default): a host's deployments old and new


class ModelRegistry:
    """Models by name: the default checkpoint (none for a host's server, which serves what its workers load) plus
    checkpoints and adapters loaded at run time, at most MAX_LOADED of them: loading one more lets the least
    recently asked for go (its clients load it again: agent/policies/served.py)."""

    def __init__(self, base_dir: str | None, name: str | None, max_new_tokens: int) -> None:
        self.base_dir = str(Path(base_dir).resolve()) if base_dir else None
        self.default = name if base_dir else None
        self.max_new_tokens = max_new_tokens
        self._models: dict[str, Served] = {}
        self._guard = threading.Lock()
        self._loading = threading.Lock()  # one load at a time: two workers asking at once load it once
        self._scratch = tempfile.TemporaryDirectory(prefix="loupe-serve-")
        if self.base_dir:
            self._models[name] = self._open(name, self.base_dir)

    def _open(self, name: str, path: str, parent: str | None = None) -> Served:
        from agent.policies.local import LocalPolicy
        from transformers import AutoTokenizer

        source = Path(path)
        if (source / "adapter_config.json").is_file() and not (source / "config.json").is_file():
            if self.base_dir is None:
                raise APIError(HTTPStatus.BAD_REQUEST, f"{path!r} is an adapter, and this server has no base to put it "
                                                       "on (start it with --init BASE)")
            source = self._merge_adapter(name, source)
            parent = self.default
        elif not (source / "config.json").is_file():
            raise APIError(HTTPStatus.BAD_REQUEST,
                           f"{path!r} is neither a checkpoint dir (config.json) nor a PEFT adapter dir (adapter_config.json)")
        elif parent is not None and reads_images(source) != reads_images(self.base_dir):
            kinds = {True: "a vision-language checkpoint", False: "a text checkpoint"}
            raise APIError(HTTPStatus.BAD_REQUEST,
                           f"{path!r} is {kinds[reads_images(source)]} but the served base {self.default!r} is "
                           f"{kinds[reads_images(self.base_dir)]}: its clients would be prompted for the wrong model")
        if reads_images(source):
            from trainer.vlm_serve import VisionPolicy  # transformers' vision classes only for vision checkpoints

            policy = VisionPolicy(str(source), temperature=0.0, max_new_tokens=self.max_new_tokens)
            return Served(name=name, path=str(path), policy=policy, tokenizer=policy.tokenizer, parent=parent,
                          vision=True)
        policy = LocalPolicy(str(source), temperature=0.0, max_new_tokens=self.max_new_tokens)
        tokenizer = AutoTokenizer.from_pretrained(str(source), local_files_only=True)
        return Served(name=name, path=str(path), policy=policy, tokenizer=tokenizer, parent=parent,
                      batcher=Batcher(policy))

    def _merge_adapter(self, name: str, adapter: Path) -> Path:
        """Merge a PEFT adapter onto the base checkpoint into a scratch dir LocalPolicy (VisionPolicy) can load."""
        from peft import PeftModel
        from transformers import AutoModelForCausalLM, AutoModelForImageTextToText, AutoTokenizer

        vision = reads_images(self.base_dir)
        loader = AutoModelForImageTextToText if vision else AutoModelForCausalLM
        base = loader.from_pretrained(self.base_dir, local_files_only=True)
        problem = adapter_mismatch(adapter, base)  # PEFT would load an adapter of another base into a no-op
        if problem:
            raise APIError(HTTPStatus.BAD_REQUEST, f"adapter {str(adapter)!r} does not fit the served base "
                                                   f"{self.default!r} ({self.base_dir}): {problem}")
        try:
            merged = PeftModel.from_pretrained(base, str(adapter)).merge_and_unload()
        except Exception as exc:  # peft raises several types for a mismatched adapter
            raise APIError(HTTPStatus.BAD_REQUEST, f"adapter {str(adapter)!r} does not fit the served base: {exc}") from None
        target = Path(self._scratch.name) / f"{name}-{uuid.uuid4().hex[:8]}"
        merged.save_pretrained(target)
        if vision:
            from trainer.tiny_vlm import forget_processor_class, load_processor

            load_processor(self.base_dir).save_pretrained(target)
            forget_processor_class(target)
        else:
            AutoTokenizer.from_pretrained(self.base_dir, local_files_only=True).save_pretrained(target)
        # the adapter was trained on the base's prompts, so it reads the base's prompt style
        (target / LOUPE_FILE).write_text(json.dumps({"prompt_style": checkpoint_prompt_style(self.base_dir)}) + "\n")
        return target

    def get(self, name: str | None) -> Served:
        with self._guard:
            key = name or self.default
            if key not in self._models:
                raise APIError(HTTPStatus.NOT_FOUND, f"The model '{key}' does not exist. Loaded: {sorted(self._models)}",
                               "model_not_found")
            self._models[key].used = time.monotonic()
            return self._models[key]

    def list(self) -> list[Served]:
        with self._guard:
            return list(self._models.values())

    def load(self, name: str, path: str) -> None:
        with self._loading:
            with self._guard:
                if name in self._models:
                    raise APIError(HTTPStatus.BAD_REQUEST, f"The lora adapter '{name}' has already been loaded.")
            served = self._open(name, path, parent=self.default)  # slow part outside the guard
            with self._guard:
                self._models[name] = served
                loaded = sorted((s for s in self._models.values() if s.name != self.default), key=lambda s: s.used)
                leaving = loaded[:max(0, len(loaded) - MAX_LOADED)]
                for gone in leaving:
                    del self._models[gone.name]
            for gone in leaving:
                log.info("unloaded %s, the least recently asked for of %d", gone.name, len(loaded))
                if gone.batcher is not None:
                    gone.batcher.close()

    def unload(self, name: str) -> None:
        with self._guard:
            if name == self.default:
                raise APIError(HTTPStatus.BAD_REQUEST, f"'{name}' is the base model; it cannot be unloaded")
            if name not in self._models:
                raise APIError(HTTPStatus.NOT_FOUND, f"The lora adapter '{name}' cannot be found.")
            served = self._models.pop(name)
        if served.batcher is not None:
            served.batcher.close()

    def close(self) -> None:
        for served in self.list():
            if served.batcher is not None:
                served.batcher.close()
        self._scratch.cleanup()


def _text_messages(messages) -> list[dict]:
    if not isinstance(messages, list) or not messages or not all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in messages
    ):
        raise APIError(HTTPStatus.BAD_REQUEST, "'messages' must be a non-empty list of {role, content} objects with string content")
    return messages


def chat_completion(registry: ModelRegistry, body: dict, client_gone: Callable[[], bool] | None = None) -> dict:
    """Answer one /v1/chat/completions request body. ``client_gone`` says whether the asker went away (its request
    is then dropped from the batch)."""
    temperature = body.get("temperature", 0.0)
    max_tokens = body.get("max_tokens") or body.get("max_completion_tokens") or registry.max_new_tokens
    if not isinstance(temperature, (int, float)) or temperature < 0:
        raise APIError(HTTPStatus.BAD_REQUEST, "'temperature' must be a number >= 0")
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise APIError(HTTPStatus.BAD_REQUEST, "'max_tokens' must be a positive integer")
    top_k = body.get("top_logprobs") or 0
    if not isinstance(top_k, int) or isinstance(top_k, bool) or not 0 <= top_k <= MAX_TOP_LOGPROBS:
        raise APIError(HTTPStatus.BAD_REQUEST, f"'top_logprobs' must be an integer from 0 to {MAX_TOP_LOGPROBS}")
    stop = body.get("stop") or ()
    stop = (stop,) if isinstance(stop, str) else stop
    if not isinstance(stop, (list, tuple)) or not all(isinstance(s, str) and s for s in stop) or len(stop) > 4:
        raise APIError(HTTPStatus.BAD_REQUEST, "'stop' must be a string or a list of up to 4 non-empty strings")
    stop = tuple(stop)
    tops: list = []
    served = registry.get(body.get("model"))
    messages = body.get("messages")
    if served.vision:
        from trainer.vlm_serve import RequestError, prepare

        try:
            if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
                raise RequestError("'messages' must be a non-empty list of {role, content} objects")
            messages = restyle_messages(messages, served.policy.prompt_style)
            prepared = prepare(messages, served.policy.processor)
        except RequestError as exc:
            raise APIError(HTTPStatus.BAD_REQUEST, str(exc)) from None
        with served.lock:
            served.policy.max_new_tokens = int(max_tokens)
            output = served.policy.generate(prepared, float(temperature))
        prompt_tokens = prepared.prompt_tokens
    else:
        # a client renders in the full style unless told otherwise; the model answers what it was trained on
        messages = restyle_messages(_text_messages(messages), getattr(served.policy, "prompt_style", DEFAULT_STYLE))
        prompt = served.policy.prompt_ids(messages)
        try:
            request = served.batcher.submit(prompt, max_tokens=int(max_tokens), temperature=float(temperature),
                                            top_k=top_k if body.get("logprobs") else 0, stop=stop)
        except PromptTooLong as exc:
            raise APIError(HTTPStatus.BAD_REQUEST, str(exc)) from None
        while not request.done.wait(0.25):
            if client_gone is not None and client_gone():
                request.cancelled = True
        if request.error == "the model was unloaded":
            raise APIError(HTTPStatus.NOT_FOUND, f"The model '{served.name}' was unloaded while answering; load it "
                                                 "again", "model_not_found")
        text = request.text
        for s in stop:
            if s in text:
                text = text[: text.index(s)]
        output = PolicyOutput(text=text, token_ids=request.ids, token_logprobs=request.logprobs, error=request.error)
        tops = request.tops
        prompt_tokens = len(request.prompt)
    if output.error:  # a partial answer is not an answer
        raise APIError(HTTPStatus.INTERNAL_SERVER_ERROR, f"generation failed: {output.error}", "server_error")
    token_ids = list(output.token_ids or [])
    choice: dict = {
        "index": 0,
        "message": {"role": "assistant", "content": output.text},
        "finish_reason": "length" if len(token_ids) >= max_tokens else "stop",
        "logprobs": None,
    }
    if body.get("logprobs"):
        content = []
        as_ids = bool(body.get("return_tokens_as_token_ids"))  # vLLM's option: exact ids for RL

        def entry(token_id: int, logprob: float) -> dict:
            token = f"token_id:{token_id}" if as_ids else served.tokenizer.decode([token_id])
            return {"token": token, "logprob": float(logprob), "bytes": list(token.encode("utf-8"))}

        for place, (token_id, logprob) in enumerate(zip(token_ids, output.token_logprobs or [])):
            alternatives = tops[place] if place < len(tops) else []
            content.append({**entry(token_id, logprob), "top_logprobs": [entry(i, lp) for i, lp in alternatives]})
        choice["logprobs"] = {"content": content}
    if prompt_tokens is None:
        prompt_tokens = len(chat_ids(served.tokenizer, messages, add_generation_prompt=True))
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": served.name,
        "choices": [choice],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(token_ids),
                  "total_tokens": prompt_tokens + len(token_ids)},
    }


def make_handler(registry: ModelRegistry) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt: str, *args) -> None:  # to stderr through logging, not print
            log.info("%s %s", self.address_string(), fmt % args)

        def _send(self, status: int, payload, content_type: str = "application/json") -> None:
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, exc: APIError) -> None:
            self._send(exc.status, {"error": {"message": exc.message, "type": exc.kind, "code": int(exc.status)}})

        def _body(self) -> dict:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY_BYTES:
                self.close_connection = True  # the unread body must not be taken for the next request
                raise APIError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                               f"the request body is {length / 2**20:.0f} MB, over the {MAX_BODY_BYTES // 2**20} MB cap")
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError as exc:
                raise APIError(HTTPStatus.BAD_REQUEST, f"request body is not valid JSON: {exc.msg}") from None
            if not isinstance(body, dict):
                raise APIError(HTTPStatus.BAD_REQUEST, "request body must be a JSON object")
            return body

        def _client_gone(self) -> bool:
            """True once the client closed its connection (readable with nothing to read: it sent no second
            request while waiting for this answer)."""
            try:
                readable, _, _ = select.select([self.connection], [], [], 0)
                return bool(readable) and not self.connection.recv(1, socket.MSG_PEEK)
            except OSError:
                return True

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            try:
                if self.path.rstrip("/") == "/v1/models":
                    self._send(HTTPStatus.OK, {"object": "list", "data": [
                        {"id": s.name, "object": "model", "created": s.created, "owned_by": "loupe",
                         "root": s.path, "parent": s.parent} for s in registry.list()]})
                elif self.path.rstrip("/") in ("/health", ""):
                    self._send(HTTPStatus.OK, {"status": "ok"})
                else:
                    raise APIError(HTTPStatus.NOT_FOUND, f"no route GET {self.path}")
            except APIError as exc:
                self._error(exc)

        def do_POST(self) -> None:  # noqa: N802
            try:
                body = self._body()
                route = self.path.rstrip("/")
                if route == "/v1/chat/completions":
                    if body.get("stream"):
                        raise APIError(HTTPStatus.BAD_REQUEST, "stream=true is not supported by this server")
                    self._send(HTTPStatus.OK, chat_completion(registry, body, self._client_gone))
                elif route == "/v1/load_lora_adapter":
                    name, path = body.get("lora_name"), body.get("lora_path")
                    if not isinstance(name, str) or not name or not isinstance(path, str) or not path:
                        raise APIError(HTTPStatus.BAD_REQUEST, "both 'lora_name' and 'lora_path' are required")
                    registry.load(name, path)
                    self._send(HTTPStatus.OK, f"Success: LoRA adapter '{name}' added successfully.", "text/plain")
                elif route == "/v1/unload_lora_adapter":
                    name = body.get("lora_name")
                    if not isinstance(name, str) or not name:
                        raise APIError(HTTPStatus.BAD_REQUEST, "'lora_name' is required")
                    registry.unload(name)
                    self._send(HTTPStatus.OK, f"Success: LoRA adapter '{name}' removed successfully.", "text/plain")
                else:
                    raise APIError(HTTPStatus.NOT_FOUND, f"no route POST {self.path}")
            except APIError as exc:
                self._error(exc)
            except Exception as exc:  # a bug must still answer the client, in the same shape
                log.exception("request failed")
                self._error(APIError(HTTPStatus.INTERNAL_SERVER_ERROR, f"internal error: {exc}", "server_error"))

    return Handler


def serve(config: ServeConfig) -> None:
    """Serve until interrupted. Prints ``{"serving": url, "model": name}`` once listening. Without ``--init`` it
    serves only what clients load (a host's server: agent/policies/served.py)."""
    if config.init and not (Path(config.init) / "config.json").is_file():
        raise TrainerError(f"--init {config.init!r} is not a checkpoint dir (no config.json there)")
    set_threads(config.threads)
    name = (config.name or Path(config.init).resolve().name) if config.init else None
    registry = ModelRegistry(config.init, name, config.max_new_tokens)
    server = ThreadingHTTPServer((config.host, config.port), make_handler(registry))
    server.daemon_threads = True
    host, port = server.server_address[:2]
    emit({"serving": f"http://{host}:{port}/v1", "model": name})
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        registry.close()
