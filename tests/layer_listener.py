"""A channel-layer group subscriber for tests that publish from synchronous code.

The pub/sub channel layer keeps its subscriptions per event loop, and every async_to_sync call from a plain thread
brings a new loop: a channel made in one call receives nothing in the next. A GroupListener keeps one loop on a
thread of its own for its whole life and hands what arrives to the test's thread."""
from __future__ import annotations

import asyncio
import queue
import threading
import uuid

from channels.layers import get_channel_layer


class GroupListener:
    def __init__(self, group: str, *, timeout: float = 30) -> None:
        self.group = group
        self.layer = get_channel_layer()
        self.received: queue.Queue = queue.Queue()
        self._ready_token = uuid.uuid4().hex
        self._ready = threading.Event()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="group-listener", daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._join(), self.loop).result(timeout)
        # SUBSCRIBE is sent without waiting for Redis to take it: subscribed once a message sent after it comes back
        deadline = timeout
        while not self._ready.wait(0.5):
            deadline -= 0.5
            if deadline <= 0:
                self.close()
                raise TimeoutError(f"the listener of {group} never received its own message")
            self._send_ready()

    def _send_ready(self) -> None:
        asyncio.run_coroutine_threadsafe(
            self.layer.group_send(self.group, {"type": "listener.ready", "token": self._ready_token}), self.loop
        ).result(10)

    async def _join(self) -> None:
        self.channel = await self.layer.new_channel()
        await self.layer.group_add(self.group, self.channel)
        self._pump = asyncio.get_running_loop().create_task(self._take_all())
        await self.layer.group_send(self.group, {"type": "listener.ready", "token": self._ready_token})

    async def _take_all(self) -> None:
        while True:
            message = await self.layer.receive(self.channel)
            if message.get("type") == "listener.ready" and message.get("token") == self._ready_token:
                self._ready.set()
            else:
                self.received.put(message)

    def receive(self, timeout: float = 10) -> dict:
        try:
            return self.received.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"nothing arrived on {self.group} within {timeout} s") from None

    def close(self) -> None:
        if hasattr(self, "_pump"):
            self.loop.call_soon_threadsafe(self._pump.cancel)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    def __enter__(self) -> GroupListener:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
