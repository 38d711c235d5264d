"""REST for think-aloud audio: clips, chunk uploads (idempotent), transcripts; served only to members."""
from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.parsers import BaseParser
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import audio, queues, reviews
from annotation import tasks as celery_tasks  # the Celery tasks (a TaskSpec is an env task)
from annotation.models import AudioClip, ItemState, QueueState, TranscriptWord, Verdict
from annotation.review_summary import review_payload
from cycles import dashboards
from projects import selectors
from rollouts import selectors as rollout_selectors
from rollouts.models import ReviewStatus
from projects.models import Role
from core.api import LimitedCharField, StrictSerializer, UserRef, results_of
from rollouts.api_episodes import ReviewSummaryOutput
from core.errors import ApplicationError


class RawAudioParser(BaseParser):
    """Chunk bodies are raw bytes; the view checks their type itself (415 with a message)."""

    media_type = "*/*"

    def parse(self, stream, media_type=None, parser_context=None):
        if not stream:
            return b""
        limit = settings.LOUPE_AUDIO_MAX_BYTES
        data = stream.read(limit + 1)  # never more than the limit in memory, however large the body
        if len(data) > limit:
            raise ApplicationError(f"The chunk is over the {limit} bytes a chunk may have; record with a shorter "
                                   "MediaRecorder timeslice.", status=413)
        return data


class ClipCreateInput(StrictSerializer):
    client_id = serializers.CharField(max_length=64)
    content_type = serializers.CharField(max_length=100)
    started_at = serializers.FloatField(help_text="Session clock (server epoch seconds) when recording began.")
    voice_commands = serializers.BooleanField(required=False, default=False,
                                              help_text="Say commands aloud: utterances that are commands are sent "
                                                        "as the page's voice.command events, not kept as thoughts.")


class ClipOutput(serializers.Serializer):
    """What clip_output builds: a think-aloud recording."""

    id = serializers.IntegerField()
    episode = serializers.IntegerField()
    client_id = serializers.CharField()
    content_type = serializers.CharField()
    started_at = serializers.FloatField(help_text="Session seconds (server epoch) when recording began.")
    origin = serializers.FloatField(help_text="Where the clip's audio time 0 lies on the session clock (chunk 0's "
                                              "start).")
    committed_until = serializers.FloatField()
    chunks = serializers.IntegerField()
    transcribed_chunks = serializers.IntegerField()
    finished = serializers.BooleanField()


def clip_output(clip: AudioClip) -> dict:
    # Where the clip's audio time 0 lies on the session clock: its words are timed from chunk 0's start.
    origin = clip.chunks.filter(index=0).values_list("start_time", flat=True).first()
    return {"id": clip.pk, "episode": clip.episode_id, "client_id": clip.client_id, "content_type": clip.content_type,
            "started_at": clip.started_at, "origin": clip.started_at if origin is None else origin,
            "committed_until": clip.committed_until,
            "chunks": clip.chunks.count(), "transcribed_chunks": clip.transcribed_chunks, "finished": clip.finished}


def _clip_for(request, clip_id: int, *, own: bool = False) -> AudioClip:
    clip = AudioClip.objects.select_related("episode").filter(pk=clip_id).first()
    if clip is None:
        raise ApplicationError("No such audio clip, or you are not a member of its project.", status=404)
    rollout_selectors.episode_for_user(user=request.user, episode_id=clip.episode_id)
    if own and clip.user_id != request.user.pk:
        raise ApplicationError("Only the person who recorded a clip may upload to it.", status=403)
    return clip


class ClipCreateApi(APIView):
    @extend_schema(request=ClipCreateInput, responses={201: ClipOutput, 200: ClipOutput})
    def post(self, request, episode_id: int):
        episode, _ = rollout_selectors.episode_for_user(user=request.user, episode_id=episode_id)
        data = ClipCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        clip, created = audio.clip_create(episode=episode, user=request.user, **data.validated_data)
        return Response(clip_output(clip), status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


CHUNK_STORED = inline_serializer("ChunkStored", {
    "clip": serializers.IntegerField(), "index": serializers.IntegerField(), "size": serializers.IntegerField(),
    "duplicate": serializers.BooleanField(help_text="The same bytes were stored already.")})


class ChunkUploadApi(APIView):
    """PUT the chunk's bytes with its Content-Type and `X-Chunk-Start` (session-clock seconds)."""

    parser_classes = [RawAudioParser]

    @extend_schema(request={"audio/webm": bytes}, parameters=[OpenApiParameter("X-Chunk-Start", float, "header")],
                   responses={201: CHUNK_STORED, 200: CHUNK_STORED})
    def put(self, request, clip_id: int, index: int):
        clip = _clip_for(request, clip_id, own=True)
        if clip.finished:
            raise ApplicationError("This clip is finished; start a new one.", status=409)
        try:
            start_time = float(request.headers.get("X-Chunk-Start", ""))
        except ValueError:
            raise ApplicationError("Send the chunk's start on the session clock as the X-Chunk-Start header.")
        content_type = request.content_type or ""
        if not content_type.lower().startswith("audio/"):
            raise ApplicationError(f"Chunks must be audio (audio/webm), not '{content_type or 'none'}'.", status=415)
        data = request.data if isinstance(request.data, bytes) else b""
        chunk, created = audio.chunk_store(clip=clip, index=index, data=data, content_type=content_type,
                                           start_time=start_time)
        return Response({"clip": clip.pk, "index": chunk.index, "size": chunk.size, "duplicate": not created},
                        status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class ClipFinishApi(APIView):
    @extend_schema(request=None, responses={202: ClipOutput})
    def post(self, request, clip_id: int):
        clip = _clip_for(request, clip_id, own=True)
        AudioClip.objects.filter(pk=clip.pk).update(finished=True)
        celery_tasks.clip_transcribe.delay(clip.pk, True)
        clip.refresh_from_db()
        return Response(clip_output(clip), status=status.HTTP_202_ACCEPTED)


class ClipDetailApi(APIView):
    @extend_schema(responses={200: ClipOutput})
    def get(self, request, clip_id: int):
        return Response(clip_output(_clip_for(request, clip_id)))


def byte_range(header: str, size: int) -> tuple[int, int] | None:
    """The (first, last) byte of a single `Range: bytes=...` request within ``size`` bytes; None when the
    header asks for nothing this answers (absent, several ranges, another unit). Raises ValueError when
    the range lies outside the body (416)."""
    unit, _, spec = header.partition("=")
    if unit.strip() != "bytes" or "," in spec or "-" not in spec:
        return None
    first, _, last = (part.strip() for part in spec.partition("-"))
    try:
        if not first:  # the last N bytes
            n = int(last)
            if n <= 0:
                raise ValueError("empty suffix range")
            return max(0, size - n), size - 1
        start = int(first)
        end = min(int(last), size - 1) if last else size - 1
    except ValueError:
        raise ValueError(f"bad range {header!r}") from None
    if start >= size or start > end:
        raise ValueError(f"range {header!r} is outside the {size} bytes")
    return start, end


class ClipAudioApi(APIView):
    """The clip's recording as one stream (chunks concatenated), for replay. Answers byte ranges, which
    a browser's audio player needs to seek."""

    @extend_schema(responses={(200, "audio/webm"): bytes, (206, "audio/webm"): bytes})
    def get(self, request, clip_id: int):
        clip = _clip_for(request, clip_id)
        body, content_type = audio.clip_playback(clip)  # spoken personal data silenced (issue 40)
        try:
            wanted = byte_range(request.headers.get("Range", ""), len(body))
        except ValueError:
            response = HttpResponse(status=416)
            response["Content-Range"] = f"bytes */{len(body)}"
            return response
        if wanted is None:
            response = HttpResponse(body, content_type=content_type)
        else:
            start, end = wanted
            response = HttpResponse(body[start:end + 1], content_type=content_type, status=206)
            response["Content-Range"] = f"bytes {start}-{end}/{len(body)}"
        response["Accept-Ranges"] = "bytes"
        response["Cache-Control"] = "private, no-store"
        return response


class TranscriptWordOutput(serializers.Serializer):
    """A transcribed word: ``start`` and ``end`` are session seconds, ``step`` the step it was spoken in."""

    word = serializers.CharField()
    start = serializers.FloatField()
    end = serializers.FloatField()
    probability = serializers.FloatField()
    step = serializers.IntegerField(allow_null=True)
    clip = serializers.IntegerField()
    username = serializers.CharField()


class TranscriptApi(APIView):
    @extend_schema(responses={200: inline_serializer("TranscriptOutput", {
        "words": TranscriptWordOutput(many=True), "clips": ClipOutput(many=True)})})
    def get(self, request, episode_id: int):
        episode, _ = rollout_selectors.episode_for_user(user=request.user, episode_id=episode_id)
        words = TranscriptWord.objects.filter(clip__episode=episode).select_related("step", "clip__user") \
            .order_by("start", "clip_id", "position")
        return Response({"words": [{"word": w.word, "start": w.start, "end": w.end, "probability": w.probability,
                                    "step": w.step.index if w.step_id else None, "clip": w.clip_id,
                                    "username": w.clip.user.username} for w in words],
                         "clips": [clip_output(c) for c in episode.audio_clips.all()]})


# --- reviews, agreement, dashboard (managers) ------------------------------------------------------
class ReviewInput(StrictSerializer):
    verdict = serializers.ChoiceField(choices=["accept", "reject"])
    grade = serializers.IntegerField(min_value=1, max_value=5, required=False, allow_null=True, default=None)
    step_labels = serializers.DictField(child=serializers.CharField(allow_blank=True, allow_null=True),
                                        required=False, default=dict)
    comment = LimitedCharField("review_comment", required=False, allow_blank=True, default="")


class ReviewOutput(serializers.Serializer):
    """What review_summary.review_payload builds."""

    id = serializers.IntegerField()
    episode = serializers.IntegerField()
    reviewer = UserRef()
    verdict = serializers.ChoiceField(choices=Verdict.values)
    grade = serializers.IntegerField(allow_null=True)
    step_labels = serializers.DictField(
        child=serializers.ChoiceField(choices=["good", "wasteful", "wrong", "critical"]),
        help_text="Label by step index.")
    comment = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class ReviewSubmittedOutput(ReviewOutput):
    review_status = serializers.ChoiceField(choices=ReviewStatus.values)
    review_summary = ReviewSummaryOutput()


class ReviewListApi(APIView):
    @extend_schema(responses={200: results_of(ReviewOutput, "ReviewList")})
    def get(self, request, episode_id: int):
        episode, _ = rollout_selectors.episode_for_user(user=request.user, episode_id=episode_id, minimum=Role.MANAGER)
        return Response({"results": [review_payload(r) for r in episode.reviews.select_related("reviewer")]})


class ReviewSubmitApi(APIView):
    """Create or replace the caller's review of a finished episode. Managers review any episode of their
    project; an annotator only one they hold from a review queue that assigns them."""

    @extend_schema(request=ReviewInput, responses={200: ReviewSubmittedOutput})
    def put(self, request, episode_id: int):
        episode, role = rollout_selectors.episode_for_user(user=request.user, episode_id=episode_id)
        if not selectors.role_at_least(role, Role.MANAGER) and not queues.may_review(episode=episode,
                                                                                    reviewer=request.user):
            raise ApplicationError("This needs the manager role, or a hold on the episode from a review queue that "
                                   "assigns you: ask for your next one with “Review next”.", status=403)
        data = ReviewInput(data=request.data)
        data.is_valid(raise_exception=True)
        review = reviews.review_submit(episode=episode, reviewer=request.user, **data.validated_data)
        episode.refresh_from_db(fields=["review_status", "review_summary"])
        return Response({**review_payload(review), "review_status": episode.review_status,
                         "review_summary": episode.review_summary})


class ReviewAgreementOutput(serializers.Serializer):
    """What reviews.agreement builds."""

    episodes_with_multiple_reviews = serializers.IntegerField()
    agreement = serializers.FloatField(allow_null=True, help_text="Share of multiply-reviewed episodes whose verdicts "
                                                                  "all agree; null with none.")
    kappa = serializers.FloatField(allow_null=True, help_text="Cohen's kappa over every pair of reviews of one "
                                                              "episode; null when undefined.")
    reviewers = inline_serializer("ReviewerTally", {
        "username": serializers.CharField(), "reviews": serializers.IntegerField(),
        "accepts": serializers.IntegerField()}, many=True)


class DashboardOutput(serializers.Serializer):
    """What dashboards.dashboard_series builds, with the reviewers' agreement."""

    success_by_checkpoint = inline_serializer("SuccessByCheckpoint", {
        "checkpoint": serializers.CharField(), "day": serializers.DateField(), "episodes": serializers.IntegerField(),
        "success_rate": serializers.FloatField()}, many=True)
    interventions = inline_serializer("InterventionsByDay", {
        "day": serializers.DateField(), "episodes": serializers.IntegerField(),
        "per_episode": serializers.FloatField()}, many=True)
    void_rate = inline_serializer("VoidRateByDay", {
        "day": serializers.DateField(), "steps": serializers.IntegerField(), "rate": serializers.FloatField()},
        many=True)
    annotator_throughput = inline_serializer("AnnotatorThroughput", {
        "username": serializers.CharField(), "day": serializers.DateField(), "episodes": serializers.IntegerField(),
        "steps": serializers.IntegerField()}, many=True)
    dataset_growth = inline_serializer("DatasetGrowth", {
        "created_at": serializers.DateTimeField(), "kind": serializers.CharField(), "rows": serializers.IntegerField(),
        "name": serializers.CharField()}, many=True)
    corrections_learned = inline_serializer("CorrectionsLearned", {
        "username": serializers.CharField(), "corrections": serializers.IntegerField(),
        "learned": serializers.IntegerField(), "share": serializers.FloatField(allow_null=True)}, many=True,
        required=False, help_text="Per annotator: of their corrections that promoted checkpoints trained on or held "
                                  "out, how many those checkpoints learned (cycles/learned.py).")
    agreement = ReviewAgreementOutput()


class AgreementApi(APIView):
    @extend_schema(responses={200: ReviewAgreementOutput})
    def get(self, request, project_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.MANAGER)
        return Response(reviews.agreement(project=project))


class DashboardApi(APIView):
    @extend_schema(responses={200: DashboardOutput})
    def get(self, request, project_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.MANAGER)
        return Response({**dashboards.dashboard_series(project=project), "agreement": reviews.agreement(project=project)})


# --- review queues ---------------------------------------------------------------------------------
class QueueCreateInput(StrictSerializer):
    name = LimitedCharField("queue_name")
    filter = serializers.DictField(required=False, default=dict, help_text="The review list's filters.")
    overlap = serializers.IntegerField(help_text="Reviewers per episode, 1 to 5.")
    assignees = serializers.ListField(child=serializers.IntegerField(), help_text="User ids of project members.")


class QueueProgressOutput(serializers.Serializer):
    items = serializers.IntegerField()
    pending = serializers.IntegerField()
    done = serializers.IntegerField()
    adjudication = serializers.IntegerField()
    adjudicated = serializers.IntegerField()
    reviews_done = serializers.IntegerField()
    reviews_needed = serializers.IntegerField()
    reviewers = inline_serializer("QueueReviewerProgress", {
        "id": serializers.IntegerField(), "username": serializers.CharField(), "reviewed": serializers.IntegerField(),
        "skipped": serializers.IntegerField(), "holding": serializers.IntegerField()}, many=True)


class QueueAgreementOutput(serializers.Serializer):
    items_with_multiple_reviews = serializers.IntegerField()
    agreement = serializers.FloatField(allow_null=True)
    kappa = serializers.FloatField(allow_null=True)
    reviewers = inline_serializer("QueueReviewerAgreement", {
        "username": serializers.CharField(), "reviews": serializers.IntegerField(),
        "settled": serializers.IntegerField(), "agreement": serializers.FloatField(allow_null=True),
        "kappa": serializers.FloatField(allow_null=True)},
        many=True)


class QueueItemOutput(serializers.Serializer):
    """What queues.item_payload builds; ``reviews`` (the counted reviews) where it is asked for them."""

    id = serializers.IntegerField()
    queue = serializers.IntegerField()
    episode = serializers.IntegerField()
    state = serializers.ChoiceField(choices=ItemState.values)
    reviews_done = serializers.IntegerField()
    final_verdict = serializers.ChoiceField(choices=Verdict.values, allow_null=True)
    adjudicated_by = serializers.CharField(allow_null=True)
    adjudication_comment = serializers.CharField()
    reviews = ReviewOutput(many=True, required=False)


class QueueOutput(serializers.Serializer):
    """What queues.queue_payload builds; managers also get the agreement and the items awaiting adjudication."""

    id = serializers.IntegerField()
    project = serializers.IntegerField()
    name = serializers.CharField()
    filter = serializers.DictField(child=serializers.CharField(), help_text="The review list's filters.")
    overlap = serializers.IntegerField()
    state = serializers.ChoiceField(choices=QueueState.values)
    hold_seconds = serializers.IntegerField()
    created_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    assignees = UserRef(many=True)
    progress = QueueProgressOutput()
    agreement = QueueAgreementOutput(required=False)
    adjudication = QueueItemOutput(many=True, required=False)


class QueueListApi(APIView):
    """Managers see and create queues; annotators see the queues that assign them."""

    @extend_schema(responses={200: results_of(QueueOutput, "QueueList")})
    def get(self, request, project_id: int):
        project, role = selectors.project_for_user(user=request.user, project_id=project_id)
        return Response({"results": [queues.queue_payload(q) for q in
                                     queues.queues_for_user(user=request.user, project=project, role=role)]})

    @extend_schema(request=QueueCreateInput, responses={201: QueueOutput})
    def post(self, request, project_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.MANAGER)
        data = QueueCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        queue = queues.queue_create(project=project, actor=request.user, **data.validated_data)
        return Response(queues.queue_payload(queue, detail=True), status=status.HTTP_201_CREATED)


class QueueStateInput(StrictSerializer):
    state = serializers.ChoiceField(choices=["open", "closed"])


class QueueDetailApi(APIView):
    """Progress (and, for managers, agreement and the items awaiting adjudication); managers open or close it."""

    @extend_schema(responses={200: QueueOutput})
    def get(self, request, queue_id: int):
        queue, role = queues.queue_for_user(user=request.user, queue_id=queue_id)
        return Response(queues.queue_payload(queue, detail=selectors.role_at_least(role, Role.MANAGER)))

    @extend_schema(request=QueueStateInput, responses={200: QueueOutput})
    def patch(self, request, queue_id: int):
        queue, _ = queues.queue_for_user(user=request.user, queue_id=queue_id, manager=True)
        data = QueueStateInput(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(queues.queue_payload(queues.queue_state_set(queue=queue, actor=request.user,
                                                                    state=data.validated_data["state"]), detail=True))


class QueueNextApi(APIView):
    """The caller's next episode from the queue, held for them; ``item`` is null when none is left for them."""

    @extend_schema(request=None, responses={200: inline_serializer("QueueNextOutput", {
        "queue": serializers.IntegerField(), "item": serializers.IntegerField(allow_null=True),
        "episode": serializers.IntegerField(allow_null=True), "held_until": serializers.DateTimeField(allow_null=True),
        "reviewed_by_you": serializers.IntegerField(), "left_for_you": serializers.IntegerField()})})
    def post(self, request, queue_id: int):
        queue, _ = queues.queue_for_user(user=request.user, queue_id=queue_id)
        claim = queues.queue_next(queue=queue, reviewer=request.user)
        return Response(queues.claim_payload(claim, queue=queue, reviewer=request.user))


class QueueReleaseInput(StrictSerializer):
    skip = serializers.BooleanField(required=False, default=False,
                                    help_text="Also never offer this item to the caller again.")


class QueueReleaseApi(APIView):
    """Let go of an item the caller holds (nothing happens when they hold none)."""

    @extend_schema(request=QueueReleaseInput, responses={200: QueueItemOutput})
    def post(self, request, item_id: int):
        item = queues.item_for_user(user=request.user, item_id=item_id)
        data = QueueReleaseInput(data=request.data)
        data.is_valid(raise_exception=True)
        queues.queue_release(item=item, reviewer=request.user, skip=data.validated_data["skip"])
        return Response(queues.item_payload(item, with_reviews=False))


class QueueItemApi(APIView):
    """One item with its counted reviews side by side (managers)."""

    @extend_schema(responses={200: QueueItemOutput})
    def get(self, request, item_id: int):
        return Response(queues.item_payload(queues.item_for_user(user=request.user, item_id=item_id, manager=True)))


class AdjudicateInput(StrictSerializer):
    verdict = serializers.ChoiceField(choices=["accept", "reject"])
    comment = LimitedCharField("adjudication_comment", required=False, allow_blank=True, default="")


class QueueAdjudicateApi(APIView):
    """A manager's final verdict on an item whose reviews disagree; the episode's review status follows it."""

    @extend_schema(request=AdjudicateInput, responses={200: inline_serializer("QueueItemAdjudicated", {
        **QueueItemOutput().get_fields(), "review_status": serializers.ChoiceField(choices=ReviewStatus.values)})})
    def post(self, request, item_id: int):
        item = queues.item_for_user(user=request.user, item_id=item_id, manager=True)
        data = AdjudicateInput(data=request.data)
        data.is_valid(raise_exception=True)
        item = queues.item_adjudicate(item=item, actor=request.user, **data.validated_data)
        item.episode.refresh_from_db(fields=["review_status", "review_summary"])
        return Response({**queues.item_payload(item), "review_status": item.episode.review_status})
