from celery import shared_task


@shared_task(acks_late=True, reject_on_worker_lost=True, autoretry_for=(OSError,), retry_backoff=True, max_retries=5)
def clip_transcribe(clip_id: int, final: bool = False) -> int:
    """Transcribe what is new in one clip (the `audio` queue). A killed worker's job is redelivered and,
    being deterministic, ends with the same transcript."""
    from annotation import audio

    return audio.clip_transcribe(clip_id=clip_id, final=final)
