"""Past one machine, on one machine: two daphne processes and two rollout workers share PostgreSQL and
the Redis channel layer, as many hosts would. Watchers on either daphne see every event of episodes run
by either worker, and a person steering through one daphne drives an episode another host runs."""
from __future__ import annotations

import pytest

from rollouts import episodes
from rollouts.models import Episode
from tests.reliability.live import (Watcher, assert_acked_commands_stored_once, assert_saw_the_whole_log,
                                    scripted_project, wait_episodes_end)
from tests.stack import ProcessStack, stack_env, start_daphne, start_together, start_worker, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser, pytest.mark.slow]


def test_watchers_on_either_daphne_see_every_event_of_episodes_on_either_worker(tmp_path):
    project, task, users, tokens = scripted_project("login-user", max_steps=8)
    stack = ProcessStack([], [])
    watchers: list[Watcher] = []
    try:
        *daphnes, _ = start_together(
            *(lambda n=n: start_daphne(stack, tmp_path, stack_env(), name=f"daphne-{n}") for n in "ab"),
            lambda: start_worker(stack, tmp_path, stack_env(), queues="live,rollouts", name="host1"))
        # supervised: the first episode waits for a person at each step, so host1 is still busy with it
        # when the second is queued, and host2 must take that one
        first = episodes.episodes_start(project=project, task=task, seeds=[3], mode="supervised",
                                        actor=users[0])[0].pk
        wait_for(lambda: Episode.objects.get(pk=first).pending_index is not None, 180, what="the first proposal")
        start_worker(stack, tmp_path, stack_env(), queues="live,rollouts", name="host2")
        second = episodes.episodes_start(project=project, task=task, seeds=[4], mode="supervised",
                                         actor=users[1])[0].pk
        # each episode is steered through the daphne that does not watch it first, and watched on both
        for episode_id, steer_on, token in ((first, daphnes[1], tokens[0]), (second, daphnes[0], tokens[1])):
            watchers.append(Watcher(steer_on, episode_id, token, approve=True, name=f"steer-{episode_id}"))
            for n, base in enumerate(daphnes):
                watchers.append(Watcher(base, episode_id, tokens[1 - (episode_id == first)],
                                        name=f"watch-{episode_id}-{'ab'[n]}"))
        wait_episodes_end([first, second], 300)
        hosts = {e.pk: e.worker for e in Episode.objects.filter(pk__in=[first, second])}
        assert len(set(hosts.values())) == 2, f"both episodes ran on one worker: {hosts}\n{stack.tail()}"
        for episode in Episode.objects.filter(pk__in=[first, second]):
            assert episode.status == "finished" and episode.n_steps >= 3, (episode.status, episode.end_reason)
        for watcher in watchers:
            assert_saw_the_whole_log(watcher)
        approvals = assert_acked_commands_stored_once(watchers)
        assert approvals >= 6
    finally:
        for watcher in watchers:
            watcher.close()
        stack.stop()
