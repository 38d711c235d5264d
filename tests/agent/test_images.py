"""agent/images.py: screenshots as chat image parts."""

from __future__ import annotations

import pytest

from agent.images import image_bytes, image_part, image_url, map_image_urls


def _turn(text: str, image: bytes) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}, image_part(image)]}


def test_image_urls_are_data_urls_and_map_image_urls_changes_only_image_parts():
    png = b"\x89PNG\r\n\x1a\nrest"
    assert image_url(png).startswith("data:image/png;base64,") and image_bytes(image_url(png)) == png
    assert image_url(b"\xff\xd8x").startswith("data:image/jpeg;base64,")
    for bad in ("https://example.org/a.jpg", "data:text/plain;base64,aGk=", "data:image/png;base64,%%%", "x"):
        with pytest.raises(ValueError):
            image_bytes(bad)
    messages = [{"role": "system", "content": "Act."}, _turn("Do X.", b"\xff\xd8a"),
                {"role": "assistant", "content": "Action: wait()"}, _turn("s", b"\xff\xd8b")]
    mapped = map_image_urls(messages, lambda url: "ref:" + image_bytes(url).decode("latin-1"))
    assert [p["image_url"]["url"] for m in mapped if isinstance(m["content"], list) for p in m["content"]
            if p["type"] == "image_url"] == ["ref:\xff\xd8a", "ref:\xff\xd8b"]
    assert [m["content"] if isinstance(m["content"], str) else m["content"][0] for m in mapped] == \
        [m["content"] if isinstance(m["content"], str) else m["content"][0] for m in messages]
    assert map_image_urls(mapped, lambda ref: image_url(ref[4:].encode("latin-1"))) == messages
