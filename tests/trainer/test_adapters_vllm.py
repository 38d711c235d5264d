"""An adapter is checked before vLLM loads it (issue 36, vllm#48022): vLLM renames an adapter's module names with the
served model class's prefix rules and applies it where a renamed module exists, so a mis-prefixed adapter loads and
does nothing. trainer.adapters.served_adapter_mismatch checks names (renamed as vLLM does) and shapes against the
served base's checkpoint dir; training.policy_server refuses such an adapter before asking vLLM."""

import json
import shutil
import subprocess
import sys

import pytest
import torch
from peft import LoraConfig, get_peft_model
from safetensors.torch import load_file, save_file
from transformers import AutoModelForImageTextToText

from core.errors import ApplicationError
from trainer.adapters import PREFIX, served_adapter_mismatch, vllm_name
from trainer.tiny_vlm import save_tiny_vlm


def _renamed(source, target, rename) -> None:
    target.mkdir()
    shutil.copy(source / "adapter_config.json", target / "adapter_config.json")
    tensors = load_file(source / "adapter_model.safetensors")
    save_file({rename(key): value for key, value in tensors.items()}, target / "adapter_model.safetensors")


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    """The tiny VLM (saved with the hub's names: model.layers.*, visual.*), a LoRA of it as PEFT saves one from
    transformers 5 (model.language_model.layers.*), the same tensors under the hub's names, and under a name with
    the ``model.`` left out (language_model.layers.*: what nothing maps)."""
    root = tmp_path_factory.mktemp("vllm-adapters")
    base = save_tiny_vlm(root / "base")
    model = AutoModelForImageTextToText.from_pretrained(base, local_files_only=True)
    get_peft_model(model, LoraConfig(r=4, target_modules=r".*language_model.*\.(q_proj|v_proj)")).save_pretrained(
        root / "fits")
    _renamed(root / "fits", root / "hub-names", lambda key: key.replace("model.language_model.", "model."))
    _renamed(root / "fits", root / "misprefixed",
             lambda key: key.replace(PREFIX + "model.language_model.", PREFIX + "language_model."))
    _renamed(root / "fits", root / "reshaped", lambda key: key)
    tensors = load_file(root / "reshaped" / "adapter_model.safetensors")
    key = next(k for k in tensors if "q_proj.lora_A" in k)
    tensors[key] = torch.zeros(tensors[key].shape[0], tensors[key].shape[1] * 2)
    save_file(tensors, root / "reshaped" / "adapter_model.safetensors")
    return root, base


def test_an_adapter_of_the_served_base_passes_in_either_name_scheme(dirs):
    root, base = dirs
    keys = load_file(root / "fits" / "adapter_model.safetensors")
    assert any(".model.language_model.layers." in key for key in keys)  # transformers 5's names
    assert served_adapter_mismatch(root / "fits", base) == ""
    assert served_adapter_mismatch(root / "hub-names", base) == ""  # vLLM maps Qwen2.5-VL's "model." too


def test_a_misprefixed_adapter_is_refused_naming_a_module_and_what_vllm_makes_of_it(dirs):
    root, base = dirs
    problem = served_adapter_mismatch(root / "misprefixed", base)
    assert problem.startswith("vLLM would load it and apply nothing to 4 of the modules it adapts")
    assert "language_model.layers.0.self_attn.q_proj" in problem and "Qwen2_5_VLForConditionalGeneration" in problem


def test_an_adapter_of_other_shapes_is_refused(dirs):
    root, base = dirs
    assert "trained on a base of other shapes" in served_adapter_mismatch(root / "reshaped", base)


def test_a_text_lora_on_qwen3_vl_is_refused_as_vllm_maps_no_bare_model_prefix_there(dirs, tmp_path):
    """vllm#48022: Qwen3-VL's mapper has no rule for model.*, so model.layers.* reaches nothing."""
    root, base = dirs
    qwen3 = tmp_path / "qwen3"
    shutil.copytree(base, qwen3)
    config = json.loads((qwen3 / "config.json").read_text())
    (qwen3 / "config.json").write_text(json.dumps({**config, "architectures": ["Qwen3VLForConditionalGeneration"]}))
    weights = load_file(qwen3 / "model.safetensors")  # Qwen3-VL's hub checkpoints: model.language_model.*
    save_file({("model." + key if key.startswith("visual.") else key.replace("model.", "model.language_model.", 1))
               : value for key, value in weights.items()}, qwen3 / "model.safetensors")
    assert served_adapter_mismatch(root / "fits", qwen3) == ""  # transformers 5's names reach it
    assert vllm_name("model.layers.0.self_attn.q_proj", "Qwen3VLForConditionalGeneration") == \
        "model.layers.0.self_attn.q_proj"
    assert "apply nothing" in served_adapter_mismatch(root / "hub-names", qwen3)


def test_bad_dirs_are_said_plainly(dirs, tmp_path):
    root, base = dirs
    assert "adapter_config.json cannot be read" in served_adapter_mismatch(tmp_path, base)
    assert "cannot be read to check it against" in served_adapter_mismatch(root / "fits", tmp_path)


def test_the_program_prints_the_problem_and_exits_2(dirs):
    root, base = dirs
    bad = subprocess.run([sys.executable, "-m", "trainer.adapters", str(root / "misprefixed"), str(base)],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "apply nothing" in json.loads(bad.stdout)["problem"]
    good = subprocess.run([sys.executable, "-m", "trainer.adapters", str(root / "fits"), str(base)],
                          capture_output=True, text=True)
    assert good.returncode == 0 and json.loads(good.stdout) == {"problem": ""}


def test_the_flywheel_refuses_a_misprefixed_adapter_before_asking_vllm(dirs, tmp_path, settings):
    """A Loupe LoRA checkpoint: merged weights at the top, the adapter in adapter/. Nothing listens at the URL: a
    check that let the adapter through would end in 'cannot be reached' instead."""
    from training import policy_server

    root, base = dirs
    checkpoint = tmp_path / "c1"
    shutil.copytree(base, checkpoint)
    shutil.copytree(root / "misprefixed", checkpoint / "adapter")
    settings.LOUPE_OPENAI_SERVER, settings.LOUPE_OPENAI_BASE_URL = "vllm", "http://127.0.0.1:9"
    with pytest.raises(ApplicationError, match="p-c1 was not loaded into vLLM: vLLM would load it and apply nothing"):
        policy_server.served_model_load(name="p-c1", path=str(checkpoint / "adapter"))
    with pytest.raises(ApplicationError, match="apply nothing"):  # against the served base, named
        policy_server.served_model_load(name="p-c1", path=str(root / "misprefixed"), base=str(base))
    with pytest.raises(ApplicationError, match="is not a LoRA adapter dir .* vLLM loads only adapters"):
        policy_server.served_model_load(name="p-c1", path=str(checkpoint))  # a whole checkpoint
    shutil.rmtree(checkpoint / "adapter")
    shutil.copytree(root / "fits", checkpoint / "adapter")
    with pytest.raises(ApplicationError, match="cannot be reached"):  # checked, then sent
        policy_server.served_model_load(name="p-c1", path=str(checkpoint / "adapter"))
