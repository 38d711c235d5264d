"""Screenshots in chat messages: an image part's ``data:`` URL made from an image's bytes and read back, and every
image URL of a conversation rewritten (the flywheel stores references to its screenshot files instead of the base64,
and turns them back)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable

__all__ = ["image_bytes", "image_part", "image_url", "map_image_urls"]


def _mime(image: bytes) -> str:
    if image.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if image[:4] == b"RIFF" and image[8:12] == b"WEBP":
        return "image/webp"
    return "image/jpeg"  # what every env writes (agent/envs/base.py)


def image_url(image: bytes) -> str:
    """A screenshot as the ``data:`` URL of an image part."""
    return f"data:{_mime(image)};base64,{base64.b64encode(image).decode('ascii')}"


def image_bytes(url: str) -> bytes:
    """The image a ``data:image/...;base64,`` URL holds; ValueError for anything else."""
    header, comma, payload = url.partition(",") if isinstance(url, str) else ("", "", "")
    if not (header.startswith("data:image/") and header.endswith(";base64") and comma):
        raise ValueError(f"not a base64 data:image URL: {str(url)[:40]!r}")
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("the data:image URL is not valid base64") from None


def image_part(image: bytes) -> dict:
    return {"type": "image_url", "image_url": {"url": image_url(image)}}


def map_image_urls(messages: list[dict], change: Callable[[str], str]) -> list[dict]:
    """``messages`` with the URL of every image part replaced by ``change(url)``; the rest as it was.

    The flywheel stores a prompt with each screenshot's base64 replaced by a reference to its stored file,
    and puts the base64 back when it needs the prompt as it was sent (see rollouts/episodes.py)."""
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = [{**part, "image_url": {**part["image_url"], "url": change(part["image_url"]["url"])}}
                       if part.get("type") == "image_url" and isinstance(part.get("image_url"), dict) else part
                       for part in content]
            message = {**message, "content": content}
        out.append(message)
    return out
