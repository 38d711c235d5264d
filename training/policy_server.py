"""The OpenAI-compatible policy server (vLLM in production, ``python -m trainer serve`` here): the name a
checkpoint answers to, and loading a checkpoint into the running server."""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

from django.conf import settings

from core.errors import ApplicationError
from rollouts.models import Checkpoint
from training import trainer_process


def served_name_for(checkpoint: Checkpoint) -> str:
    """The model name a checkpoint answers to on the openai (vLLM) server: unique across projects."""
    return f"{checkpoint.project.slug}-{checkpoint.name}"[:200]


def served_model_load(*, name: str, path: str, base: str | None = None) -> None:
    """Load a checkpoint into the running OpenAI-compatible server under ``name``, without a restart: vLLM's
    runtime LoRA loading (``POST /v1/load_lora_adapter``; vLLM needs ``--enable-lora`` and
    ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``). Loading a name that is already loaded is a success.

    On vLLM (``LOUPE_OPENAI_SERVER``) a LoRA adapter dir is checked first against ``base``, a checkpoint dir of what
    the server serves (default: the adapter's own checkpoint, whose merged weights have the base's modules): vLLM
    would load an adapter whose module names it does not map to the model's and apply nothing, with no error
    (trainer/adapters.py). Loupe's own server checks adapters itself."""
    folder = Path(path)
    if settings.LOUPE_OPENAI_SERVER == "vllm" and not (folder / "adapter_config.json").is_file():
        raise ApplicationError(f"{name} cannot be loaded into vLLM: {path} is not a LoRA adapter dir (no "
                               "adapter_config.json), and vLLM loads only adapters while it runs. Serve a whole "
                               "checkpoint with python -m trainer serve (LOUPE_OPENAI_SERVER=loupe) or train a LoRA.",
                               status=409)
    if settings.LOUPE_OPENAI_SERVER == "vllm":
        base = base or (str(folder.parent) if (folder.parent / "config.json").is_file() else None)
        if base is None:
            raise ApplicationError(f"{name} cannot be checked before vLLM loads it: no checkpoint of the served base "
                                   f"is known (the cycle setting base_checkpoint, or a checkpoint dir around {path}).",
                                   status=409)
        problem = trainer_process.adapter_check(str(folder), base)
        if problem:
            raise ApplicationError(f"{name} was not loaded into vLLM: {problem}", status=409)
    url = settings.LOUPE_OPENAI_BASE_URL.rstrip("/")
    url = (url[:-3] if url.endswith("/v1") else url) + "/v1/load_lora_adapter"
    headers = {"Content-Type": "application/json"}
    if settings.LOUPE_OPENAI_API_KEY:
        headers["Authorization"] = f"Bearer {settings.LOUPE_OPENAI_API_KEY}"
    request = urllib.request.Request(url, data=json.dumps({"lora_name": name, "lora_path": path}).encode(),
                                     headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=600):
            return
    except urllib.error.HTTPError as exc:
        body = exc.read().decode(errors="replace")
        if exc.code == 400 and "already been loaded" in body:
            return
        raise ApplicationError(f"The policy server at {url} refused to load {name} from {path} ({exc.code}): "
                               f"{body[:300]}", status=502) from None
    except OSError as exc:
        raise ApplicationError(f"The policy server at {url} cannot be reached ({exc}); start it (see trainer/README.md "
                               "for vLLM's flags) or check LOUPE_OPENAI_BASE_URL.", status=502) from None
