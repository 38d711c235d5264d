"""The trainer as a program (training/trainer_process.py): a vision-language checkpoint's training commands go under
torchrun or accelerate launch when LOUPE_TRAIN_PROCESSES asks for more than one process, and a run trained so
shows rank 0's progress lines as a one-process run does."""
from __future__ import annotations

import base64
import importlib.util
import io
import json
import signal
import sys
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from PIL import Image, ImageDraw

from core.errors import ApplicationError
from training import trainer_process
from training import runs
from rollouts.models import Checkpoint
from snapshots.models import DatasetSnapshot, SnapshotStatus
from training.models import RunStatus, TrainingRun
from tests.factories import make_project

ROOT = Path(__file__).resolve().parents[2]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]


@pytest.fixture(scope="module")
def vlm_dir(tmp_path_factory) -> Path:
    """An untrained tiny Qwen2.5-VL checkpoint dir (trainer/tiny_vlm.py), built by the trainer's own code."""
    from trainer.tiny_vlm import save_tiny_vlm

    folder = tmp_path_factory.mktemp("vlm") / "init"
    save_tiny_vlm(folder)  # here: a process of its own imported torch and transformers again (some 9 s)
    return folder


def sft(init, **options) -> list[str]:
    return trainer_process.command("sft", "--data", "rows.jsonl", "--init", str(init), "--out", "ckpt", **options)


def test_command_wraps_vlm_training_in_torchrun_only_when_two_processes_are_asked_for(settings, tmp_path, vlm_dir):
    tail = ["-m", "trainer", "sft", "--data", "rows.jsonl", "--init", str(vlm_dir), "--out", "ckpt", "--max-steps", "5"]
    assert sft(vlm_dir, max_steps=5) == [sys.executable, *tail]  # LOUPE_TRAIN_PROCESSES defaults to 1
    settings.LOUPE_TRAIN_PROCESSES = 2
    assert sft(vlm_dir, max_steps=5) == [*TORCHRUN, *tail]
    assert trainer_process.command("rl", init=str(vlm_dir), data="e.jsonl")[:len(TORCHRUN)] == TORCHRUN
    assert trainer_process.command("dpo", "--init", str(vlm_dir))[:len(TORCHRUN)] == TORCHRUN
    # sft, dpo and rl of a text checkpoint go through TRL too; what does not train: one process
    text = tmp_path / "text"
    text.mkdir()
    (text / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    assert sft(text)[:len(TORCHRUN)] == sft("tiny")[:len(TORCHRUN)] == TORCHRUN
    assert trainer_process.command("rl", init=str(text), data="e.jsonl")[:len(TORCHRUN)] == TORCHRUN
    for argv in (trainer_process.command("eval", init=str(vlm_dir), out="e"),
                 trainer_process.command("serve", init=str(vlm_dir)), trainer_process.command("demos", out="d.jsonl"),
                 trainer_process.command("coldstart", "--out", "v0")):
        assert argv[:3] == [sys.executable, "-m", "trainer"]
    argv = sft(vlm_dir)
    assert trainer_process.shown(argv) == ("python -m torch.distributed.run --standalone --nproc-per-node 2 "
                                           f"-m trainer sft --data rows.jsonl --init {vlm_dir} --out ckpt")

    settings.LOUPE_TRAIN_LAUNCHER = "accelerate"
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--config_file"]
    assert sft(vlm_dir)[:7] == [*launch, str(ROOT / "trainer/launch/ddp.yaml"), "--num_processes", "2"]
    settings.LOUPE_TRAIN_LAUNCH_CONFIG = "trainer/launch/fsdp.yaml"
    assert sft(vlm_dir)[:10] == [*launch, str(ROOT / "trainer/launch/fsdp.yaml"), "--num_processes", "2",
                                 "--main_process_port", "0", "-m"]


def test_launch_settings_that_cannot_work_are_refused_in_words(settings, tmp_path, vlm_dir):
    settings.LOUPE_TRAIN_PROCESSES = 2

    def refused(match: str, **values):
        for name, value in values.items():
            setattr(settings, name, value)
        with pytest.raises(ApplicationError, match=match):
            sft(vlm_dir)

    refused("LOUPE_TRAIN_LAUNCHER must be one of torchrun, accelerate; it is 'mpirun'", LOUPE_TRAIN_LAUNCHER="mpirun")
    refused("LOUPE_TRAIN_PROCESSES must be a whole number of processes, 1 or more", LOUPE_TRAIN_LAUNCHER="torchrun",
            LOUPE_TRAIN_PROCESSES=0)
    refused("set LOUPE_TRAIN_LAUNCHER=accelerate to use it", LOUPE_TRAIN_PROCESSES=2,
            LOUPE_TRAIN_LAUNCH_CONFIG="trainer/launch/ddp.yaml")
    refused(r"missing\.yaml cannot be read as an accelerate config", LOUPE_TRAIN_LAUNCHER="accelerate",
            LOUPE_TRAIN_LAUNCH_CONFIG=str(tmp_path / "missing.yaml"))
    two = tmp_path / "two.yaml"
    two.write_text("distributed_type: MULTI_GPU\nnum_machines: 2\n")
    refused("spans 2 machines; a train worker launches on its own machine only", LOUPE_TRAIN_LAUNCH_CONFIG=str(two))
    if importlib.util.find_spec("deepspeed") is None:
        refused("uses DeepSpeed, which is not installed on this train worker: pip install deepspeed",
                LOUPE_TRAIN_LAUNCH_CONFIG="trainer/launch/zero3.yaml")
    # a launcher's report of its failed processes comes after the trainer's own line: the person sees that one
    stderr = "error: --init x: no such dir\n[rank0]: Traceback ...\ntorch.distributed.elastic...ChildFailedError:\n"
    assert trainer_process.failure("sft", 1, stderr) == "trainer sft exited with 1: error: --init x: no such dir"


def test_a_trainer_killed_by_a_signal_says_so_and_what_most_likely_sent_sigkill():
    log = "2026-12-07 10:40:28,538 trainer INFO sft: 164 rows (0 images), 3 a batch in each of 1 processes\n"
    killed = trainer_process.failure("sft", -signal.SIGKILL, log)
    assert killed.startswith("trainer sft was killed (SIGKILL), most likely by the kernel for want of memory")
    assert killed.endswith("3 a batch in each of 1 processes")
    assert trainer_process.failure("eval", -signal.SIGTERM, "") == "trainer eval was stopped by SIGTERM: no output"


def data_uri(i: int) -> str:
    image = Image.new("RGB", (160, 210), "white")
    ImageDraw.Draw(image).rectangle([10 + 12 * i, 40, 50 + 12 * i, 60], fill=(0, 0, 200))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


@pytest.mark.django_db
def test_a_two_process_run_under_accelerate_shows_rank_0s_progress_as_one_process_does(settings, vlm_dir):
    settings.LOUPE_TRAIN_PROCESSES, settings.LOUPE_TRAIN_LAUNCHER = 2, "accelerate"  # trainer/launch/ddp.yaml
    project = make_project()
    rows = [{"messages": [{"role": "user", "content": f"Click button {i}."},
                          {"role": "assistant", "content": f"Action: click(x={30 + 12 * i}, y=50)"}],
             "images": [data_uri(i)]} for i in range(4)]
    name = default_storage.save(f"snapshots/p{project.pk}-vlm.jsonl",
                                ContentFile("".join(json.dumps(r) + "\n" for r in rows).encode()))
    snapshot = DatasetSnapshot.objects.create(project=project, kind="sft", status=SnapshotStatus.READY, rows=4,
                                              file=name)
    init = Checkpoint.objects.create(project=project, name="vlm0", uri=str(vlm_dir), base_model="tiny-vlm",
                                     reads_images=True)
    run = TrainingRun.objects.create(project=project, algorithm="sft", snapshot=snapshot, init_checkpoint=init,
                                     config={"stages": [{"algorithm": "sft", "snapshot": snapshot.pk,
                                                         "max_steps": 2}]})

    assert runs.run_execute(run_id=run.pk) == RunStatus.SUCCEEDED
    run.refresh_from_db()
    assert "python -m accelerate.commands.launch --config_file" in run.log and "--num_processes 2" in run.log
    assert "rank 1 of 2 done" in run.log  # both ranks ran; only rank 0's lines reached stdout
    assert [item["step"] for item in run.metrics] == [1, 2] and all(item["total"] == 2 for item in run.metrics)
    assert all({"loss", "lr", "phase"} <= set(item) for item in run.metrics) and run.progress == 1.0
    out = Path(run.checkpoint.uri)
    assert out.parent == Path(django_settings.LOUPE_CHECKPOINT_DIR) / f"project-{project.pk}" / f"run-{run.pk}"
    assert json.loads((out / "metrics.json").read_text())["steps"] == 2 and (out / "loupe.json").is_file()
    assert run.checkpoint.metrics["rows"] == 4
