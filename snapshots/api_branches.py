"""REST for comparing a branch with its parent, side by side from the branch point (managers: it is review)."""
from __future__ import annotations

from django.db.models import Prefetch
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import ApplicationError
from projects.models import Role
from rollouts import episodes, selectors
from rollouts.api_episodes import EpisodeOutput, StepOutput
from rollouts.models import Episode, Judgement, Rejection, Step
from rollouts.steps import step_payload
from snapshots import branch_pairs


def _side(episode: Episode, start: int, judgements: dict[int, Judgement]) -> dict:
    steps = (Step.objects.filter(episode=episode, index__gte=start).order_by("index")
             .prefetch_related(Prefetch("rejections", queryset=Rejection.objects.order_by("attempt"))))
    judgement = judgements.get(episode.pk)
    return {"episode": episodes.episode_payload(episode),
            "judge": {"verdict": judgement.verdict or None, "reason": judgement.reason,
                      "confidence": judgement.confidence} if judgement else None,
            "steps": [step_payload(step) for step in steps]}


def branch_comparison(*, branch: Episode) -> dict:
    """A branch and its parent from the branch point on: each one's steps (screenshot, thought, action), outcome,
    review and judge verdicts, and the DPO pair they make (snapshots.branch_pairs.branch_pair) or why they make none."""
    if branch.branched_at is None:
        raise ApplicationError(f"Episode {branch.pk} is not a branch; compare from one of its branches (listed on "
                               "its replay's Branches card).", status=409)
    related = ("task", "checkpoint", "created_by", "controller")
    branch = Episode.objects.select_related(*related, "project").get(pk=branch.pk)
    parent = Episode.objects.select_related(*related).filter(pk=branch.parent_id).first()
    judgements = {j.episode_id: j for j in Judgement.objects.filter(
        episode_id__in=[branch.pk, branch.parent_id], latest=True)}
    pair, why = branch_pairs.branch_pair_explained(branch)
    start = branch.branched_at
    both = {}
    if parent is not None:
        for step in Step.objects.filter(episode_id__in=[branch.pk, parent.pk], index__gte=start).only(
                "episode_id", "index", "url", "elements"):
            both.setdefault(step.index, {})[step.episode_id] = step
    screens = [{"index": index, "differs": branch_pairs.screens_differ(pair_[branch.pk], pair_[parent.pk])}
               for index, pair_ in sorted(both.items()) if len(pair_) == 2]
    return {"branched_at": start,
            "branch": _side(branch, start, judgements),
            "parent": _side(parent, start, judgements) if parent is not None else None,
            "screens": screens,
            "pair": {"index": pair["index"], "chosen": pair["chosen"], "by": pair["by"],
                     "in_dataset": branch.status == "finished"} if pair else None,
            "no_pair": why}


class ComparisonSideOutput(serializers.Serializer):
    """One side of a comparison: the episode, its judge's newest verdict, its steps from the branch point on."""

    episode = EpisodeOutput()
    judge = inline_serializer("ComparisonJudgeOutput", {
        "verdict": serializers.ChoiceField(choices=["success", "failure"], allow_null=True),
        "reason": serializers.CharField(), "confidence": serializers.FloatField(allow_null=True)}, allow_null=True)
    steps = StepOutput(many=True)


class BranchCompareOutput(serializers.Serializer):
    branched_at = serializers.IntegerField(help_text="The 0-based index of the step the branch acts on anew.")
    branch = ComparisonSideOutput()
    parent = ComparisonSideOutput(allow_null=True, help_text="Null when the parent episode was deleted.")
    screens = inline_serializer("ComparedScreenOutput", {
        "index": serializers.IntegerField(),
        "differs": serializers.CharField(allow_null=True, help_text="What makes the two screens count as different "
                                                                    "(address, elements), or null.")}, many=True)
    pair = inline_serializer("ComparisonPairOutput", {
        "index": serializers.IntegerField(), "chosen": serializers.ChoiceField(choices=["branch", "parent"]),
        "by": serializers.ChoiceField(choices=["review", "reward", "judge"]),
        "in_dataset": serializers.BooleanField()}, allow_null=True,
        help_text="The DPO pair the two make: at which step, whose step is chosen and what decided it.")
    no_pair = serializers.CharField(help_text="Why they make no pair, in words; empty when they make one.")

    def to_representation(self, data: dict) -> dict:
        return data


class BranchCompareApi(APIView):
    """GET a branch beside its parent (managers, as reviewing is)."""

    @extend_schema(responses={200: BranchCompareOutput})
    def get(self, request, episode_id: int):
        branch, _ = selectors.episode_for_user(user=request.user, episode_id=episode_id, minimum=Role.MANAGER)
        return Response(BranchCompareOutput(branch_comparison(branch=branch)).data)
