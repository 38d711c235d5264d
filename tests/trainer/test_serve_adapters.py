"""A LoRA for the wrong base (issue 19): ``trainer serve``'s /v1/load_lora_adapter answers 400 with a plain message for an
adapter trained on another base or of other shapes, and for a checkpoint of the other kind, where PEFT alone would
serve the base under the adapter's name; the VLM trainer refuses LoRA targets its init lacks with exit 2."""

import json
import threading
from http.server import ThreadingHTTPServer

import pytest
import torch
from peft import LoraConfig, get_peft_model
from safetensors.torch import load_file, save_file
from transformers import AutoModelForImageTextToText

from tests.trainer.test_serve import _post
from trainer import cli
from trainer.model import load, save_checkpoint, save_tiny_untrained
from trainer.serve import ModelRegistry, make_handler
from trainer.tiny_vlm import save_tiny_vlm

Q_PROJ_A = "base_model.model.model.language_model.layers.0.self_attn.q_proj.lora_A.weight"


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    """A tiny VLM, an adapter of it, the same adapter with one tensor of another shape, and a LoRA checkpoint of the
    tiny text model (its adapter in adapter/)."""
    root = tmp_path_factory.mktemp("adapters")
    vlm = save_tiny_vlm(root / "vlm")
    model = AutoModelForImageTextToText.from_pretrained(vlm, local_files_only=True)
    peft = get_peft_model(model, LoraConfig(r=4, target_modules=r".*language_model.*\.(q_proj|v_proj)"))
    peft.save_pretrained(root / "fits")
    (root / "reshaped").mkdir()
    (root / "reshaped" / "adapter_config.json").write_text((root / "fits" / "adapter_config.json").read_text())
    tensors = load_file(root / "fits" / "adapter_model.safetensors")
    rank, width = tensors[Q_PROJ_A].shape
    tensors[Q_PROJ_A] = torch.zeros(rank, width * 2)  # an adapter of a wider model
    save_file(tensors, root / "reshaped" / "adapter_model.safetensors")
    text = save_tiny_untrained(root / "text")
    save_checkpoint(load(str(text), lora="r=4"), root / "text-lora", algorithm="test", config={}, data_sha256=None,
                    metrics={})
    return {"vlm": vlm, "fits": root / "fits", "reshaped": root / "reshaped", "text": text,
            "text_adapter": root / "text-lora" / "adapter", "width": width}


@pytest.fixture(scope="module")
def vlm_server(dirs):
    registry = ModelRegistry(str(dirs["vlm"]), "tiny-vlm", 4)
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(registry))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", registry
    finally:
        server.shutdown()
        registry.close()


def test_an_adapter_of_the_served_base_loads(vlm_server, dirs):
    base, registry = vlm_server
    status, text = _post(f"{base}/v1/load_lora_adapter", {"lora_name": "fits", "lora_path": str(dirs["fits"])})
    assert status == 200, text
    assert {served.name for served in registry.list()} == {"tiny-vlm", "fits"}


@pytest.mark.parametrize("adapter, message", [
    ("text_adapter", "does not fit the served base 'tiny-vlm' ({vlm}): it was trained on another base ({text}): 21 of "
                     "the modules it adapts are not in the served model, e.g. model.layers.0.mlp.down_proj"),
    ("reshaped", "does not fit the served base 'tiny-vlm' ({vlm}): it was trained on a base of other shapes ({vlm}): "
                 "its " + Q_PROJ_A + " is [4, {double}] but the served model's "
                 "model.language_model.layers.0.self_attn.q_proj has {width} inputs"),
    ("text", "is a text checkpoint but the served base 'tiny-vlm' is a vision-language checkpoint"),
])
def test_a_lora_for_another_base_is_a_400_naming_the_mismatch(vlm_server, dirs, adapter, message):
    base, registry = vlm_server
    status, text = _post(f"{base}/v1/load_lora_adapter", {"lora_name": adapter, "lora_path": str(dirs[adapter])})
    error = json.loads(text)["error"]
    expected = message.format(vlm=dirs["vlm"].resolve(), text=dirs["text"], double=2 * dirs["width"],
                              width=dirs["width"])
    assert status == 400 and error["code"] == 400 and expected in error["message"], error["message"]
    assert "\n" not in error["message"] and adapter not in {served.name for served in registry.list()}


def test_vlm_training_with_lora_targets_the_init_lacks_exits_2_with_one_line(tmp_path, dirs, capsys):
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"},
                                             {"role": "assistant", "content": "Action: wait()"}]}) + "\n")
    code = cli.main(["sft", "--init", str(dirs["vlm"]), "--data", str(rows), "--out", str(tmp_path / "out"),
                     "--lora", "r=4,targets=c_attn+c_proj", "--max-steps", "1"])
    said = [line for line in capsys.readouterr().err.splitlines() if "error" in line.lower()]  # no traceback
    assert code == 2 and len(said) == 1, said
    assert said[0].startswith(f"error: --lora targets c_attn, c_proj: no module of the init {dirs['vlm']} matches")
