"""A branch and its parent as a DPO pair on the identical state (snapshots.branch_pairs.branch_pair): hand-made parent and
branch, the better episode's step chosen, and the cases that make no pair."""
import pytest

from annotation.reviews import review_submit
from snapshots import branch_pairs
from snapshots import buckets
from snapshots import build
from snapshots import export
from snapshots.snapshot_kinds import DPO_KIND
from rollouts.models import Episode, Judgement, Step
from tests.factories import make_finished_episode

pytestmark = pytest.mark.django_db

PARENT_CLICK = {"name": "click", "args": {"x": 11, "y": 20}}  # the factory's step 1
OTHER_CLICK = {"name": "click", "args": {"x": 40, "y": 20}}


def branch_of(parent, *, at, steps, reward, project, task):
    """A finished branch of ``parent`` at step ``at``: its steps before ``at`` are copies of the parent's (as the
    replay stores them), then ``steps`` of its own."""
    copies = [{"action": s.action, "thought": s.thought} for s in parent.steps.order_by("index")[:at]]
    branch = make_finished_episode(project, task, steps=[*copies, *steps], reward=reward, mode="supervised")
    Episode.objects.filter(pk=branch.pk).update(parent=parent, branched_at=at, seed=parent.seed)
    for index in range(at):
        Step.objects.filter(episode=branch, index=index).update(
            info={"replayed_from": {"episode": parent.pk, "step": index}})
    return Episode.objects.get(pk=branch.pk)


def dpo_rows(project):
    snapshot = build.snapshot_create(project=project, kind="dpo", build=False)
    return export.snapshot_preview(build.snapshot_build(snapshot_id=snapshot.pk), 20)


def test_a_branch_that_acted_otherwise_at_its_step_and_succeeded_is_chosen_over_its_parents_step(demo):
    project, task = demo["project"], demo["task"]
    parent = make_finished_episode(project, task, steps=[{}, {}, {}], reward=0.0)
    branch = branch_of(parent, at=1, steps=[{"action": OTHER_CLICK, "thought": "the other button"}], reward=1.0,
                       project=project, task=task)
    pair = branch_pairs.branch_pair(branch)
    assert (pair["index"], pair["chosen"], pair["by"]) == (1, "branch", "reward")
    assert buckets.buckets(project)["dpo"]["rows"] == 1
    assert set(buckets.bucket_episodes(project, "dpo").values_list("pk", flat=True)) == {branch.pk}
    # the cycle gate counts it among the pairs whose actions differ (a DPO stage can learn from it)
    assert DPO_KIND.differing_count(Episode.objects.filter(project=project)) == 1

    [row] = dpo_rows(project)
    assert row["chosen"] == [{"role": "assistant", "content": "Thought: the other button\nAction: click(x=40, y=20)"}]
    assert row["rejected"] == [{"role": "assistant", "content": "Thought: step 1\nAction: click(x=11, y=20)"}]
    assert (row["meta"]["pair"], row["meta"]["parent_episode"], row["meta"]["step_index"]) == ("branch", parent.pk, 1)
    assert (row["meta"]["chosen_episode"], row["meta"]["rejected_episode"], row["meta"]["decided_by"]) == (
        branch.pk, parent.pk, "reward")
    # One prompt for both: the parent's at step 1 (its SFT row's prompt, the step before replayed as history).
    parent_sft = buckets.episode_rows("sft", parent, list(parent.steps.order_by("index")),
                                       buckets.export_target(project))
    assert row["prompt"] == parent_sft[1]["messages"][:-1]


def test_the_reviews_decide_before_the_reward_and_the_judge_after_it(demo):
    project, task = demo["project"], demo["task"]
    parent = make_finished_episode(project, task, steps=[{}, {}], reward=1.0)
    branch = branch_of(parent, at=1, steps=[{"action": OTHER_CLICK}], reward=0.0, project=project, task=task)
    review_submit(episode=parent, reviewer=demo["manager"], verdict="reject")
    review_submit(episode=branch, reviewer=demo["manager"], verdict="accept")
    branch.refresh_from_db()
    assert branch_pairs.branch_pair(branch)["chosen"] == "branch"  # the people's verdict over the reward

    both_failed = make_finished_episode(project, task, steps=[{}, {}], reward=0.0)
    judged = branch_of(both_failed, at=1, steps=[{"action": OTHER_CLICK}], reward=0.0, project=project, task=task)
    assert branch_pairs.branch_pair(judged) is None  # both failed by the reward, nothing else known: no pair
    Judgement.objects.create(episode=both_failed, verdict="success", reason="it was done", judge="rule")
    Judgement.objects.create(episode=judged, verdict="failure", reason="wrong box", judge="rule")
    pair = branch_pairs.branch_pair(Episode.objects.get(pk=judged.pk))
    assert (pair["chosen"], pair["by"]) == ("parent", "judge")
    rows = [row for row in dpo_rows(project) if row["meta"]["pair"] == "branch"]
    assert {(row["meta"]["episode_id"], row["meta"]["chosen_episode"]) for row in rows} == {
        (branch.pk, branch.pk), (judged.pk, both_failed.pk)}


def test_no_pair_for_equal_actions_equal_outcomes_a_gone_parent_or_a_shorter_one(demo):
    project, task = demo["project"], demo["task"]
    parent = make_finished_episode(project, task, steps=[{}, {}, {}], reward=0.0)
    same = branch_of(parent, at=1, steps=[{"action": PARENT_CLICK, "thought": "step 1"}], reward=1.0,
                     project=project, task=task)
    assert branch_pairs.branch_pair(same) is None  # it did what the parent did: no preference
    equal = branch_of(parent, at=1, steps=[{"action": OTHER_CLICK}], reward=0.0, project=project, task=task)
    assert branch_pairs.branch_pair(equal) is None  # both failed: neither is better

    # the same action at the branch point, then another on the same screen: the pair is at the later step
    later = branch_of(parent, at=1, steps=[{"action": PARENT_CLICK}, {"action": OTHER_CLICK}], reward=1.0,
                      project=project, task=task)
    assert branch_pairs.branch_pair(later)["index"] == 2
    # ... but not when the screens stopped matching there
    Step.objects.filter(episode=later, index=2).update(elements=[{"role": "button", "text": "Next", "x": 1, "y": 1,
                                                                  "width": 5, "height": 5}])
    pair, why = branch_pairs.branch_pair_explained(later)
    assert pair is None
    assert why == ("At step 3 the two screens differ (the screen has 1 element where the stored step had 0), so "
                   "their steps are not on the same state: no pair."), why

    short_parent = make_finished_episode(project, task, steps=[{}], reward=0.0)
    longer = branch_of(short_parent, at=1, steps=[{"action": OTHER_CLICK}], reward=1.0, project=project, task=task)
    assert branch_pairs.branch_pair(longer) is None  # the parent has no step 1 to compare with

    gone = make_finished_episode(project, task, steps=[{}, {}], reward=0.0)
    orphan = branch_of(gone, at=1, steps=[{"action": OTHER_CLICK}], reward=1.0, project=project, task=task)
    assert branch_pairs.branch_pair(orphan) is not None
    gone.delete()
    orphan.refresh_from_db()
    assert orphan.parent_id is None and branch_pairs.branch_pair(orphan) is None
    assert buckets.buckets(project)["dpo"]["rows"] == 0


def test_the_comparison_shows_both_continuations_from_the_branch_point_and_the_pair(demo):
    from rest_framework.test import APIClient

    project, task = demo["project"], demo["task"]
    parent = make_finished_episode(project, task, steps=[{}, {}, {}], reward=0.0)
    branch = branch_of(parent, at=1, steps=[{"action": OTHER_CLICK, "thought": "the other button"}, {}], reward=1.0,
                       project=project, task=task)
    review_submit(episode=parent, reviewer=demo["manager"], verdict="reject")
    Judgement.objects.create(episode=branch, verdict="success", reason="done", confidence=1.0, judge="rule")
    client = APIClient()
    client.force_authenticate(demo["manager"])
    body = client.get(f"/api/v1/episodes/{branch.pk}/compare").json()
    assert body["branched_at"] == 1
    assert [s["index"] for s in body["branch"]["steps"]] == [s["index"] for s in body["parent"]["steps"]] == [1, 2]
    assert body["branch"]["steps"][0]["thought"] == "the other button"
    assert body["branch"]["steps"][0]["screenshot_url"] == f"/api/v1/episodes/{branch.pk}/steps/1/screenshot"
    assert (body["parent"]["episode"]["review_status"], body["branch"]["judge"]["verdict"]) == ("rejected", "success")
    # a rejected review beside none tells them apart by nothing: the reward decides
    assert body["pair"] == {"index": 1, "chosen": "branch", "by": "reward", "in_dataset": True}
    assert body["screens"] == [{"index": 1, "differs": None}, {"index": 2, "differs": None}]

    same = branch_of(parent, at=1, steps=[{"action": PARENT_CLICK}], reward=0.0, project=project, task=task)
    body = client.get(f"/api/v1/episodes/{same.pk}/compare").json()
    assert body["pair"] is None and "same actions" in body["no_pair"]
    refused = client.get(f"/api/v1/episodes/{parent.pk}/compare")
    assert refused.status_code == 409 and "not a branch" in refused.json()["detail"]
    annotator = APIClient()
    annotator.force_authenticate(demo["annotator"])
    assert annotator.get(f"/api/v1/episodes/{branch.pk}/compare").status_code == 403
    parent.delete()
    body = client.get(f"/api/v1/episodes/{branch.pk}/compare").json()
    assert body["parent"] is None and "deleted" in body["no_pair"]


def test_a_review_that_turns_the_pair_round_freezes_as_a_new_snapshot(demo):
    project, task = demo["project"], demo["task"]
    parent = make_finished_episode(project, task, steps=[{}, {}], reward=0.0)
    branch = branch_of(parent, at=1, steps=[{"action": OTHER_CLICK}], reward=1.0, project=project, task=task)
    [first] = dpo_rows(project)
    assert first["meta"]["chosen_episode"] == branch.pk
    review_submit(episode=parent, reviewer=demo["manager"], verdict="accept")
    review_submit(episode=branch, reviewer=demo["manager"], verdict="reject")  # the people say the parent did better
    [second] = dpo_rows(project)
    assert (second["meta"]["chosen_episode"], second["meta"]["decided_by"]) == (parent.pk, "review")
    assert second["chosen"] == first["rejected"] and second["rejected"] == first["chosen"]
