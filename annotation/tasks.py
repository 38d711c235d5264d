"""Annotation's Celery tasks, thin: they take ids and call the services, which enqueue them by name (so no service
imports this module). The `audio` queue's transcription; on `default`, the judge's and the polisher's, registered
under the names the flywheel app gave them (`flywheel.tasks.*`: running workers and queued messages know them)."""
from celery import shared_task
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import InterfaceError, OperationalError

from annotation import audio, judge, polish


@shared_task(acks_late=True, reject_on_worker_lost=True, autoretry_for=(OSError,), retry_backoff=True, max_retries=5)
def clip_transcribe(clip_id: int, final: bool = False) -> int:
    """Transcribe what is new in one clip, and in the same Whisper pass in every clip with audio waiting. A killed
    worker's job is redelivered and, being deterministic, ends with the same transcript."""
    return audio.clip_transcribe(clip_id=clip_id, final=final)


@shared_task
def clips_sweep_stalled() -> list[int]:
    """Beat task: send the transcription of every clip a killed audio worker left unfinished again."""
    stalled = audio.clips_stalled(older_than_seconds=settings.LOUPE_AUDIO_STALLED_SECONDS)
    for clip_id, finished in stalled:
        clip_transcribe.delay(clip_id, finished)
    return [clip_id for clip_id, _ in stalled]


@shared_task(name="flywheel.tasks.episode_judge", acks_late=True, reject_on_worker_lost=True)
def episode_judge(episode_id: int, user_id: int | None = None) -> str:
    """Judge one finished episode (annotation/judge.py). Safe to run twice: a second run adds a newer judgement, the
    one routing reads."""
    actor = get_user_model().objects.filter(pk=user_id).first() if user_id else None
    return judge.judge_episode(episode_id=episode_id, actor=actor).verdict or "no verdict"


@shared_task(name="flywheel.tasks.step_polish", acks_late=True, reject_on_worker_lost=True,
             autoretry_for=(OperationalError, InterfaceError), retry_backoff=True, max_retries=3)
def step_polish(step_id: int) -> str:
    """Polish one step's think-aloud words into a thought (annotation/polish.py). Safe to run twice: a step already
    polished from the same words, or edited by a person, is left as it is. A lost database connection is retried; a
    polisher that fails is stored on the step as why."""
    return polish.step_polish(step_id=step_id)
