"""A project with one user per role and something of every kind an endpoint names, for the tests that call
every endpoint (the permission matrix, the fuzz run)."""
from __future__ import annotations

import subprocess
from functools import cached_property

import pytest
from rest_framework.test import APIClient

from tests.factories import make_finished_episode, make_member, make_project, make_task, make_user

# The project's name: nothing of it may appear in what a non-member is sent.
MARKER = "Matrix-secret-7f3a"


@pytest.fixture(scope="module")
def checkpoint_dir(tmp_path_factory):
    """The least a checkpoint directory needs to be deployable: config.json and readable safetensors weights."""
    import numpy as np
    from safetensors.numpy import save_file

    path = tmp_path_factory.mktemp("matrix-ckpt")
    (path / "config.json").write_text("{}")
    save_file({"w": np.zeros(2, dtype=np.float32)}, str(path / "model.safetensors"))
    return path


@pytest.fixture(scope="module")
def webm_chunk(tmp_path_factory) -> bytes:
    """One second of a tone as WebM/Opus: a real chunk 0 as MediaRecorder would send it."""
    path = tmp_path_factory.mktemp("matrix-audio") / "tone.webm"
    subprocess.run(["ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", "sine=frequency=440:duration=1",
                    "-c:a", "libopus", "-f", "webm", str(path)], check=True, timeout=60)
    return path.read_bytes()


class World:
    """A project with one user per role, an episode with screenshots, audio, a deployment; the rarer
    states (a ready snapshot, a cycle awaiting approval, ...) are built only when an endpoint asks for them."""

    def __init__(self, checkpoint_dir, webm: bytes):
        from annotation import audio
        from cycles import cycle_settings
        from training import deployments
        from rollouts.events import event_append

        self.checkpoint_dir, self.webm = checkpoint_dir, webm
        self.project = make_project(MARKER)
        other = make_project("Elsewhere")
        self.users = {role: make_user() for role in ("annotator", "manager", "admin", "outsider", "extra", "newcomer")}
        for role in ("annotator", "manager", "admin"):
            make_member(self.project, self.users[role], role)
        make_member(other, self.users["outsider"], "admin")
        self.extra_membership = make_member(self.project, self.users["extra"], "annotator")
        self.train_task = make_task(self.project, "click-test", instruction_template=MARKER)
        self.spare_task = make_task(self.project, "click-link", split="eval", seed_start=100_000, seed_end=100_099)
        self.checkpoint = deployments.checkpoint_register(project=self.project, name="first", uri=str(checkpoint_dir))
        self.deployment = deployments.deployment_promote(project=self.project, checkpoint=self.checkpoint)
        cycle_settings.settings_set(project=self.project, actor=self.users["manager"], min_new_rows=1)
        self.episode = make_finished_episode(self.project, self.train_task, mode="supervised",
                                             steps=[{"human_thought": "um the first one"}, {}],  # words to polish
                                             created_by=self.users["annotator"], outcome="success")
        step0 = self.episode.steps.get(index=0)
        event_append(episode_id=self.episode.pk, type="step.proposed",
                     payload={"index": 0, "screenshot": step0.screenshot, "thought": MARKER})
        clip, _ = audio.clip_create(episode=self.episode, user=self.users["annotator"], client_id="matrix-clip",
                                    content_type="audio/webm", started_at=10.0)
        audio.chunk_store(clip=clip, index=0, data=webm, content_type="audio/webm", start_time=10.0)
        self.clip = clip

    # path parameters
    project_id = property(lambda self: self.project.pk)
    episode_id = property(lambda self: self.episode.pk)
    member_id = property(lambda self: self.extra_membership.pk)
    task_id = property(lambda self: self.spare_task.pk)
    clip_id = property(lambda self: self.clip.pk)
    index = 0
    deployment_id = property(lambda self: self.deployment.pk)

    @cached_property
    def file_id(self) -> int:
        from projects.models import ProjectFile

        return ProjectFile.objects.create(project=self.project, url="https://example.com/a.xlsx", name="a.xlsx",
                                          stored="task-files/00/none", sha256="0" * 64, size=1).pk

    @cached_property
    def interrupted_episode_id(self) -> int:
        from rollouts.models import Episode

        return Episode.objects.create(project=self.project, task=self.train_task, seed=9, mode="supervised",
                                      status="interrupted", created_by=self.users["annotator"]).pk

    @cached_property
    def earlier_deployment_id(self) -> int:
        from training import deployments

        newer = deployments.checkpoint_register(project=self.project, name="second", uri=str(self.checkpoint_dir))
        deployments.deployment_promote(project=self.project, checkpoint=newer)
        return self.deployment.pk

    @cached_property
    def snapshot_id(self) -> int:
        from snapshots import build

        snapshot = build.snapshot_create(project=self.project, kind="sft", actor=self.users["manager"])
        return build.snapshot_build(snapshot_id=snapshot.pk).pk

    @cached_property
    def cycle_id(self) -> int:
        from cycles import cycle_settings
        from training import deployments
        from cycles.models import Cycle, CycleState

        candidate = deployments.checkpoint_register(project=self.project, name="candidate", uri=str(self.checkpoint_dir))
        return Cycle.objects.create(
            project=self.project, iteration=1, state=CycleState.DECIDE, candidate=candidate, baseline=self.checkpoint,
            config=cycle_settings.settings_clean(self.project, {}),
            decision_data={"awaiting_approval": True, "decision": {"text": "candidate 50% vs deployed 10%"}}).pk

    @cached_property
    def queue_id(self) -> int:
        """A review queue (overlap 2) assigning the annotator, manager and admin, over the finished episode,
        which the manager accepted and the admin rejected: its one item awaits adjudication."""
        from annotation import queues, reviews

        queue = queues.queue_create(project=self.project, actor=self.users["manager"], name="matrix", filter={},
                                    overlap=2, assignees=[self.users[r].pk for r in ("annotator", "manager", "admin")])
        for role, verdict in (("manager", "accept"), ("admin", "reject")):
            queues.queue_next(queue=queue, reviewer=self.users[role])
            reviews.review_submit(episode=self.episode, reviewer=self.users[role], verdict=verdict)
        return queue.pk

    @cached_property
    def branch_episode_id(self) -> int:
        """A finished branch of the episode at its step 1 (its step 0 a replayed copy), acting otherwise there."""
        from rollouts.models import Episode

        branch = make_finished_episode(self.project, self.train_task, mode="supervised",
                                       steps=[{}, {"action": {"name": "click", "args": {"x": 3, "y": 4}}}],
                                       created_by=self.users["annotator"], outcome="failure")
        Episode.objects.filter(pk=branch.pk).update(parent=self.episode, branched_at=1, seed=self.episode.seed)
        branch.steps.filter(index=0).update(info={"replayed_from": {"episode": self.episode.pk, "step": 0}})
        return branch.pk

    @cached_property
    def item_id(self) -> int:
        from annotation.models import QueueItem

        return QueueItem.objects.get(queue_id=self.queue_id).pk

    def client(self, role: str) -> APIClient:
        from webapp.auth import token_create

        client = APIClient()
        if role != "anonymous":
            _, raw = token_create(user=self.users[role])
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        return client


