"""The `audio` queue's Celery tasks: thin, they take ids and call annotation.audio (which enqueues
clip_transcribe by its name, so the two modules do not import each other)."""
from celery import shared_task
from django.conf import settings

from annotation import audio


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
