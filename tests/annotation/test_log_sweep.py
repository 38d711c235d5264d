"""The sockets' sweep of the stored log (annotation/consumers.py LogSweep): a socket that was sent nothing for a whole
sweep while events it lacks were stored is caught up from the log, one read an episode; a socket that is late but
moving (a busy daphne) is left to its broadcasts. A real daphne and a lost broadcast: tests/webapp/test_websocket.py;
a Redis restart: tests/reliability/test_outages.py."""
import asyncio
import json

import pytest

from annotation import consumers
from annotation.consumers import EpisodeConsumer, LogSweep
from rollouts.events import event_append
from tests.annotation.test_live_db import _episode, own_pool  # noqa: F401 - the fixture is used by name

pytestmark = pytest.mark.django_db(transaction=True)


def socket_at(last_seq: int, episode_id: int = 1) -> EpisodeConsumer:
    consumer = EpisodeConsumer()
    consumer.episode_id, consumer.last_seq = episode_id, last_seq
    consumer.log_lock = asyncio.Lock()
    consumer.frames = []

    async def send(text_data=None, bytes_data=None, close=False):
        consumer.frames.append(json.loads(text_data))

    consumer.send = send
    return consumer


def test_a_socket_sent_nothing_for_a_sweep_while_short_of_a_stored_seq_is_stalled():
    socket = socket_at(3)
    assert socket.swept(4) is False  # the first look: seq 4 may be in flight
    assert socket.swept(4) is True  # a whole sweep later it has not come


def test_a_socket_that_is_behind_but_was_sent_events_since_the_last_sweep_is_not_stalled():
    socket = socket_at(3)
    socket.swept(10)
    socket.last_seq = 6  # broadcasts are arriving, late: a busy daphne
    assert socket.swept(12) is False
    socket.last_seq = 12
    assert socket.swept(12) is False


def test_a_socket_that_has_everything_stored_is_never_stalled():
    socket = socket_at(5)
    assert [socket.swept(5) for _ in range(3)] == [False, False, False]


def test_the_stalled_sockets_of_an_episode_are_caught_up_with_one_read_of_its_log(monkeypatch):
    episode = _episode()
    for n in range(5):
        event_append(episode_id=episode.pk, type="step.executed", payload={"n": n})
    reads = []
    real = consumers.events_after

    def counted(**kwargs):
        reads.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(consumers, "events_after", counted)
    sockets = [socket_at(1, episode.pk), socket_at(3, episode.pk), socket_at(5, episode.pk)]

    asyncio.run(LogSweep()._catch_up(episode.pk, sockets))

    assert reads == [{"episode_id": episode.pk, "after": 1}]
    assert [[m["seq"] for m in s.frames] for s in sockets] == [[2, 3, 4, 5], [4, 5], []]
    assert [s.last_seq for s in sockets] == [5, 5, 5]
