"""The production shape of the VLM path (docker/compose.yaml, docker/Dockerfile): what the train worker's image
installs, which vLLM serves the policy, and that vLLM takes as many images a prompt as a project may send. No Docker
engine runs here: the files are read, and the Dockerfile's pip line is run by sh with ``echo`` in place of pip."""

import re
import subprocess
from pathlib import Path

import yaml

from cycles.cycle_settings import MAX_HISTORY_IMAGES

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
SERVICES = COMPOSE["services"]
# TRL 1.16's vLLM range (trl/import_utils.py is_vllm_available): GRPO's generation runs in the vLLM image too
TRL_VLLM = ((0, 22, 0), (0, 31, 0))


def pip_line(torch_index: str | None) -> str:
    """What the Dockerfile's requirements install runs, with ``TORCH_INDEX`` as a build arg gives it."""
    text = (ROOT / "docker" / "Dockerfile").read_text()
    default = re.search(r"^ARG TORCH_INDEX=(\S+)$", text, re.M).group(1)
    command = re.search(r"^RUN (pip install .*-r requirements\.txt)$", text, re.M).group(1)
    value = default if torch_index is None else torch_index
    proc = subprocess.run(["sh", "-c", "echo " + command], env={"TORCH_INDEX": value}, capture_output=True,
                          text=True, check=True)
    return proc.stdout.strip()


def test_the_train_worker_gets_cuda_torch_and_the_others_the_cpu_wheels():
    """Issue 36: worker-train reserved a GPU but shared the CPU-index image, so --device auto trained on the CPU."""
    train = SERVICES["worker-train"]
    assert train["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]
    assert train["build"]["args"]["TORCH_INDEX"] == ""
    assert train["image"] != SERVICES["web"]["image"]  # its own tag: one build would overwrite the other
    assert pip_line("") == "pip install -r requirements.txt"  # PyPI's torch: CUDA wheels on Linux
    assert pip_line(None) == "pip install --extra-index-url https://download.pytorch.org/whl/cpu -r requirements.txt"
    assert "args" not in SERVICES["web"].get("build", {})


def test_vllm_is_pinned_to_a_version_trl_supports():
    image = SERVICES["vllm"]["image"]
    name, _, tag = image.partition(":")
    assert name == "vllm/vllm-openai" and re.fullmatch(r"v\d+\.\d+\.\d+", tag), image
    version = tuple(int(part) for part in tag[1:].split("."))
    assert TRL_VLLM[0] <= version <= TRL_VLLM[1]


def test_vllm_takes_every_image_a_project_may_send_in_one_prompt():
    """Issue 36: history_images goes up to 10 (11 images in a prompt: those and the current screen) while vLLM
    allowed 6, so every step of such a project failed on the openai backend."""
    command = SERVICES["vllm"]["command"]
    limit = yaml.safe_load(command[command.index("--limit-mm-per-prompt") + 1])["image"]
    assert limit >= MAX_HISTORY_IMAGES + 1


def extras_line(extras: str | None) -> str:
    """What the Dockerfile's TRAIN_EXTRAS step runs, with ``TRAIN_EXTRAS`` as a build arg gives it ('' : nothing)."""
    text = (ROOT / "docker" / "Dockerfile").read_text()
    default = re.search(r'^ARG TRAIN_EXTRAS="(.*)"$', text, re.M).group(1)
    command = re.search(r"^RUN (if .*TRAIN_EXTRAS.*)$", text, re.M).group(1)
    value = default if extras is None else extras
    proc = subprocess.run(["sh", "-c", command.replace("pip install", "echo pip install")],
                          env={"TRAIN_EXTRAS": value}, capture_output=True, text=True, check=True)
    return proc.stdout.strip()


def test_the_train_worker_image_installs_deepspeed_pinned_and_the_others_do_not():
    """Issue 36: trainer/launch/zero3.yaml needs deepspeed, and the GPU train image had none (ZeRO-3 refused)."""
    extras = SERVICES["worker-train"]["build"]["args"]["TRAIN_EXTRAS"]
    assert re.fullmatch(r"deepspeed==\d+\.\d+\.\d+", extras), extras
    assert extras_line(extras) == f"pip install {extras}"
    assert extras_line(None) == ""  # the web and worker images build with the default
    assert "deepspeed" not in (ROOT / "requirements.txt").read_text()
