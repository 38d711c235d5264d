"""What the episode API gives people besides steps: the task's instruction, the person's finish (outcome, comment)
beside the task's check, and why an episode waits for a review; and server paths in checkpoints, runs and cycles
for admins only."""
import pytest
from rest_framework.test import APIClient

from training import deployments
from rollouts import episodes
from rollouts.models import Checkpoint, Episode
from cycles.models import Cycle
from training.models import TrainingRun
from tests.factories import make_finished_episode, make_task

pytestmark = pytest.mark.django_db


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_the_episode_api_returns_the_instruction_the_comment_and_the_review_reason(demo):
    project = demo["project"]
    task = make_task(project, "desktop-calc-multiply", env_kind="desktop")
    episode = make_finished_episode(project, task, steps=[{}], reward=0.0, outcome="success")
    episodes.episode_outcome_set(episode_id=episode.pk, outcome="success", comment="Done: the folder is there. " * 400)
    data = client_for(demo["annotator"]).get(f"/api/v1/episodes/{episode.pk}/").json()
    assert data["instruction"] == "Click it"  # the environment's, stored from the episode's first step
    assert data["comment"] == "Done: the folder is there. " * 400  # 10,800 characters, whole
    assert (data["outcome"], data["reward"]) == ("success", 0.0)
    assert data["review_reason"].startswith("A person finished with success")


def test_a_queued_episode_shows_its_tasks_written_instruction_until_the_environment_gives_one(demo):
    project = demo["project"]
    task = make_task(project, "my-notes", env_kind="desktop", instruction_template="Create notes.txt.")
    episode = Episode.objects.create(project=project, task=task, seed=0)
    assert client_for(demo["annotator"]).get(f"/api/v1/episodes/{episode.pk}/").json()["instruction"] == \
        "Create notes.txt."
    episodes.episode_live_state_set(episode_id=episode.pk, instruction="Create notes.txt in your home folder.")
    assert client_for(demo["annotator"]).get(f"/api/v1/episodes/{episode.pk}/").json()["instruction"] == \
        "Create notes.txt in your home folder."


def test_server_paths_in_checkpoints_runs_and_cycles_are_for_admins_only(demo, settings, tmp_path):
    project = demo["project"]
    folder = settings.LOUPE_CHECKPOINT_DIR / "p1" / "v3"
    checkpoint = Checkpoint.objects.create(project=project, name="v3", uri=str(folder), base_model=str(folder))
    deployments.deployment_promote(project=project, checkpoint=checkpoint, backend="scripted", reason="test")
    run = TrainingRun.objects.create(project=project, algorithm="sft", config={"out": str(folder)},
                                     error=f'File "{settings.BASE_DIR}/trainer/sft.py", line 3: failed',
                                     log=f"saved to {folder}\n")
    Cycle.objects.create(project=project, iteration=1, config={"out": str(tmp_path / "cycle-1")}, run=run,
                         error=f"the evaluation of {folder} failed")
    reads = {}
    for role in ("annotator", "manager", "admin"):
        client = client_for(demo[role])
        reads[role] = str([client.get(f"/api/v1/projects/{project.pk}/{what}/").json()
                           for what in ("checkpoints", "runs", "cycles")])
    for role in ("annotator", "manager"):
        assert str(settings.LOUPE_CHECKPOINT_DIR) not in reads[role] and str(settings.BASE_DIR) not in reads[role]
        assert str(tmp_path) not in reads[role]
        assert "…/v3" in reads[role] and "…/sft.py" in reads[role] and "…/cycle-1" in reads[role]
    assert str(folder) in reads["admin"] and str(tmp_path / "cycle-1") in reads["admin"]


def test_the_review_list_finds_the_episodes_whose_person_and_check_disagree(demo):
    project, task = demo["project"], demo["task"]
    contradicted = make_finished_episode(project, task, steps=[{}], reward=0.0, outcome="success")
    agreed = make_finished_episode(project, task, steps=[{}], reward=1.0, outcome="success")
    client = client_for(demo["manager"])

    def listed(value):
        body = client.get("/api/v1/episodes/", {"project": project.pk, "disagreement": value}).json()
        return {row["id"]: row["review_reason"] for row in body["results"]}

    assert list(listed("true")) == [contradicted.pk] and listed("true")[contradicted.pk].startswith("A person finished")
    assert list(listed("false")) == [agreed.pk]
    refused = client.get("/api/v1/episodes/", {"project": project.pk, "disagreement": "maybe"})
    assert refused.status_code == 400 and "disagreement" in refused.json()["errors"]
