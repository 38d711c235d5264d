"""A real Celery worker process executes tasks against the test database."""
from datetime import timedelta

import pytest
from django.utils import timezone

from rollouts.models import Episode, EpisodeStatus
from rollouts.tasks import episodes_sweep_interrupted
from tests.factories import make_project, make_task
from tests.stack import wait_for


@pytest.mark.django_db(transaction=True)
def test_worker_marks_a_silent_episode_interrupted(celery_worker):
    project = make_project()
    task = make_task(project)
    stale = Episode.objects.create(project=project, task=task, seed=1, status=EpisodeStatus.RUNNING,
                                   heartbeat_at=timezone.now() - timedelta(minutes=5), worker="gone:1")
    fresh = Episode.objects.create(project=project, task=task, seed=2, status=EpisodeStatus.RUNNING,
                                   heartbeat_at=timezone.now(), worker="alive:1")
    episodes_sweep_interrupted.delay()
    wait_for(lambda: Episode.objects.get(pk=stale.pk).status == EpisodeStatus.INTERRUPTED, 30, what="the sweep")
    assert Episode.objects.get(pk=fresh.pk).status == EpisodeStatus.RUNNING
    stale.refresh_from_db()
    assert "gone:1 stopped responding" in stale.end_reason
    assert stale.events.filter(type="episode.state", payload__status="interrupted").exists()
