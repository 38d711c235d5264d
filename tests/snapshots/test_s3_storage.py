"""Snapshots and training on S3-compatible storage (moto's server, a real S3 API on loopback): the snapshot is
written to the bucket, and the train worker trains on a downloaded copy (the storage has no local paths)."""
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from django.core.files.storage import default_storage
from django.test import override_settings

from snapshots import build
from training import runs
from training.models import RunStatus
from tests.factories import make_finished_episode, make_project, make_task
from tests.stack import free_port, wait_for

pytestmark = pytest.mark.django_db
BUCKET = "loupe-test"


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("s3") / "moto.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                                stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"

    def up():
        if proc.poll() is not None:
            raise AssertionError(f"moto_server exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/moto-api/", timeout=2):
                return True
        except OSError:
            return False

    wait_for(up, 60, interval=0.2, what="the S3 server")
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def s3_storage(s3_endpoint, monkeypatch):
    import boto3

    for key, value in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    s3.create_bucket(Bucket=BUCKET)
    storages = {"default": {"BACKEND": "storages.backends.s3.S3Storage",
                            "OPTIONS": {"bucket_name": BUCKET, "endpoint_url": s3_endpoint}},
                "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
    with override_settings(STORAGES=storages):
        yield s3


def untrained(project, tmp_path):
    """The tests' tiny random Llama as the checkpoint a run starts from (a run needs one: nothing is deployed here)."""
    from training import deployments
    from trainer.model import save_tiny_untrained

    return deployments.checkpoint_register(project=project, name="untrained",
                                           uri=str(save_tiny_untrained(tmp_path / "untrained")))


def test_a_snapshot_in_an_s3_bucket_trains_a_checkpoint(s3_storage, tmp_path, settings):
    settings.LOUPE_CHECKPOINT_DIR = tmp_path / "checkpoints"
    with pytest.raises(NotImplementedError):
        default_storage.path("anything")  # no local paths: the trainer cannot be handed the stored file
    project = make_project()
    task = make_task(project)
    for _ in range(2):
        make_finished_episode(project, task, steps=[{}, {}], reward=1.0)
    snapshot = build.snapshot_build(snapshot_id=build.snapshot_create(project=project, kind="sft",
                                                                            build=False).pk)
    assert snapshot.status == "ready" and snapshot.rows == 4
    keys = {item["Key"] for item in s3_storage.list_objects_v2(Bucket=BUCKET)["Contents"]}
    assert snapshot.file in keys

    run = runs.run_create(project=project, snapshot=snapshot, max_steps=2,
                              init_checkpoint=untrained(project, tmp_path))
    assert runs.run_execute(run_id=run.pk) == RunStatus.SUCCEEDED
    run.refresh_from_db()
    assert run.checkpoint is not None and (Path(run.checkpoint.uri) / "config.json").exists()
    assert run.metrics and run.metrics[-1]["phase"] == "sft"
    assert "--data /tmp/loupe-snapshot-" in run.log  # a downloaded copy, removed afterwards
    copy = run.log.split("--data ", 1)[1].split(" ", 1)[0]
    assert not Path(copy).exists()


def test_a_snapshot_missing_from_the_bucket_fails_the_run_with_its_reason(s3_storage, tmp_path, settings):
    settings.LOUPE_CHECKPOINT_DIR = tmp_path / "checkpoints"
    project = make_project()
    task = make_task(project)
    make_finished_episode(project, task, steps=[{}], reward=1.0)
    snapshot = build.snapshot_build(snapshot_id=build.snapshot_create(project=project, kind="sft",
                                                                            build=False).pk)
    s3_storage.delete_object(Bucket=BUCKET, Key=snapshot.file)
    run = runs.run_create(project=project, snapshot=snapshot, max_steps=2,
                              init_checkpoint=untrained(project, tmp_path))
    assert runs.run_execute(run_id=run.pk) == RunStatus.FAILED
    run.refresh_from_db()
    assert run.error.startswith(f"The snapshot file {snapshot.file} could not be read from storage"), run.error
