"""Vision-language checkpoints: the tiny Qwen2.5-VL built offline, and SFT / DPO of it through TRL."""

import base64
import io
import json
from pathlib import Path

import pytest
import torch
from PIL import Image, ImageDraw
from safetensors.torch import load_file
from transformers import AutoModelForImageTextToText

from tests.stack import trainer_run
from trainer.configs import DPOConfig, SFTConfig, reads_images
from trainer.dpo import train_dpo
from trainer.model import TrainerError, read_loupe
from trainer.sft import train_sft
from trainer.tiny_vlm import load_processor, save_tiny_vlm
from trainer.trl_trainers import prepare_sft
from trainer.vlm import read_dpo_rows, read_sft_rows

# Saved weights carry Qwen's checkpoint names (transformers converts them back on save); adapters the module names
VISION = "visual.blocks.0.attn.qkv.weight"
TEXT = "model.layers.0.self_attn.q_proj.weight"
ADAPTED_TEXT = "base_model.model.model.language_model.layers.0.self_attn.q_proj"


def screenshot(i: int) -> Image.Image:
    """A 160x210 MiniWoB-sized screen with one button."""
    image = Image.new("RGB", (160, 210), "white")
    ImageDraw.Draw(image).rectangle([20 + 30 * i, 40, 60 + 30 * i, 60], fill=(0, 0, 200))
    return image


@pytest.fixture(scope="module")
def vlm_dir(tmp_path_factory) -> Path:
    return save_tiny_vlm(tmp_path_factory.mktemp("vlm") / "init")


@pytest.fixture
def sft_data(tmp_path) -> Path:
    (tmp_path / "images").mkdir()
    rows = []
    for i in range(2):
        screenshot(i).save(tmp_path / "images" / f"s{i}.png")
        rows.append({"messages": [{"role": "system", "content": "You operate a web page."},
                                  {"role": "user", "content": f"Click button {i}."},
                                  {"role": "assistant", "content": f"Action: click(x={40 + 30 * i}, y=50)"}],
                     "images": [f"images/s{i}.png"]})
    return write(tmp_path / "rows.jsonl", rows)


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def data_uri(image: Image.Image) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def sft_config(data: Path, init: Path, out: Path, **kw) -> SFTConfig:
    kw = {"max_steps": 3, "log_every": 1, "lr": 1e-3, "warmup_steps": 0, "batch_tokens": 2048, "max_length": 2048,
          "threads": 2, **kw}
    return SFTConfig(data=str(data), init=str(init), out=str(out), **kw)


def progress_lines(text: str) -> list[dict]:
    return [line for line in map(json.loads, text.splitlines()) if "step" in line]


def test_tiny_vlm_saves_and_loads_and_reads_a_screenshot(vlm_dir):
    model = AutoModelForImageTextToText.from_pretrained(vlm_dir)
    processor = load_processor(vlm_dir)
    assert type(model).__name__ == "Qwen2_5_VLForConditionalGeneration"
    assert type(processor.image_processor).__name__ == "Qwen2VLImageProcessorPil"  # no torchvision needed
    assert model.config.text_config.hidden_size == 64 and model.config.text_config.num_hidden_layers == 2
    assert model.config.vision_config.depth == 2 and model.config.vision_config.patch_size == 14
    assert not any("processor_class" in json.loads((vlm_dir / f).read_text())
                   for f in ("processor_config.json", "tokenizer_config.json"))
    messages = [{"role": "user", "content": [{"type": "text", "text": "Click the button."}, {"type": "image"}]}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert "<|vision_start|><|image_pad|><|vision_end|>" in text and text.endswith("<|im_start|>assistant\n")
    batch = processor(text=[text], images=[screenshot(0)], return_tensors="pt")
    assert batch["image_grid_thw"].tolist() == [[1, 16, 12]]  # 224x168 after resizing: 48 image tokens
    assert int((batch["input_ids"] == model.config.image_token_id).sum()) == 48
    with torch.no_grad():
        logits = model(**batch).logits
    assert logits.shape == (1, batch["input_ids"].shape[1], model.config.text_config.vocab_size)
    assert torch.isfinite(logits).all()


def test_rows_put_each_image_after_the_text_of_the_last_user_turns(tmp_path, vlm_dir):
    (tmp_path / "a.png").write_bytes(b"png")
    turns = [{"role": "system", "content": "s"}, {"role": "user", "content": "u1"},
             {"role": "assistant", "content": "a1"}, {"role": "user", "content": "u2"},
             {"role": "assistant", "content": "a2"}]
    path = write(tmp_path / "rows.jsonl", [{"messages": turns, "images": ["a.png", data_uri(screenshot(0))]},
                                           {"messages": turns, "images": [str(tmp_path / "a.png")]}])
    both, last = read_sft_rows(path, "full")
    assert [[p["type"] for p in m["content"]] for m in both["messages"]] == \
        [["text"], ["text", "image"], ["text"], ["text", "image"], ["text"]]
    assert both["images"][0] == {"path": str(tmp_path / "a.png"), "bytes": None}
    assert both["images"][1]["bytes"].startswith(b"\x89PNG")
    assert [[p["type"] for p in m["content"]] for m in last["messages"]][1:4] == [["text"], ["text"], ["text", "image"]]
    write(path, [{"messages": turns, "images": ["a.png"] * 3}])
    with pytest.raises(TrainerError, match=r"rows\.jsonl:1: 3 images but 2 user turns"):
        read_sft_rows(path, "full")
    write(path, [{"messages": turns, "images": ["images/missing.png"]}])
    with pytest.raises(TrainerError, match=r"rows\.jsonl:1: images\[0\]: image 'images/missing.png' not found"):
        read_sft_rows(path, "full")
    pair = {"prompt": turns[:2], "chosen": [turns[2]], "rejected": [{"role": "assistant", "content": "no"}],
            "images": ["a.png"]}
    same = {**pair, "rejected": [turns[2]]}
    (row,) = read_dpo_rows(write(tmp_path / "pairs.jsonl", [pair, same]), "full")
    assert row["prompt"][1]["content"][1]["type"] == "image" and row["chosen"][0]["content"][0]["text"] == "a1"
    assert reads_images(str(vlm_dir)) and not reads_images("tiny") and not reads_images(str(tmp_path))


def test_rows_rendered_for_another_format_or_style_are_refused_naming_the_row(tmp_path):
    (tmp_path / "a.png").write_bytes(b"png")
    turns = [{"role": "system", "content": "s"}, {"role": "user", "content": "u1"},
             {"role": "assistant", "content": "a1"}]
    target = {"style": "full", "action_format": "uitars", "reads_images": True, "history_images": 0}
    path = write(tmp_path / "rows.jsonl", [{"messages": turns, "images": ["a.png"], "rendered_for": target}])
    assert len(read_sft_rows(path, "full", "uitars")) == 1
    with pytest.raises(TrainerError, match=r"rows\.jsonl:1: the rows were rendered for uitars answers"):
        read_sft_rows(path, "full", "loupe")
    with pytest.raises(TrainerError, match=r"rows\.jsonl:1: .*style"):
        read_sft_rows(path, "named", "uitars")
    pairs = write(tmp_path / "pairs.jsonl", [{"prompt": turns[:2], "chosen": [turns[2]], "images": ["a.png"],
                                              "rejected": [{"role": "assistant", "content": "no"}],
                                              "rendered_for": target}])
    with pytest.raises(TrainerError, match=r"pairs\.jsonl:1: the rows were rendered for uitars answers"):
        read_dpo_rows(pairs, "full", "pyautogui")


def test_a_row_that_records_what_it_was_rendered_for_is_never_restyled(tmp_path):
    """Its prompt is the one its checkpoint was (or will be) sent: re-rendering it because its system prompt reads like
    another style would train on a prompt the model never sees. A legacy row in another style is re-rendered."""
    from agent.prompt import system_prompt

    (tmp_path / "a.png").write_bytes(b"png")
    turns = [{"role": "system", "content": system_prompt("compact")}, {"role": "user", "content": "Task: go"},
             {"role": "assistant", "content": "a1"}]
    target = {"style": "full", "action_format": "loupe", "reads_images": True, "history_images": 0}
    pair = {"prompt": turns[:2], "chosen": [turns[2]], "rejected": [{"role": "assistant", "content": "no"}],
            "images": ["a.png"]}
    path = write(tmp_path / "rows.jsonl", [{"messages": turns, "images": ["a.png"], "rendered_for": target},
                                           {"messages": turns, "images": ["a.png"]}])
    rendered, legacy = read_sft_rows(path, "full", "loupe")
    assert rendered["messages"][0]["content"][0]["text"] == system_prompt("compact")
    assert legacy["messages"][0]["content"][0]["text"] == system_prompt("full")
    pairs = write(tmp_path / "pairs.jsonl", [{**pair, "rendered_for": target}, pair])
    rendered, legacy = read_dpo_rows(pairs, "full", "loupe")
    assert rendered["prompt"][0]["content"][0]["text"] == system_prompt("compact")
    assert legacy["prompt"][0]["content"][0]["text"] == system_prompt("full")


def test_sft_labels_fall_on_assistant_tokens_only(tmp_path, vlm_dir):
    screenshot(0).save(tmp_path / "s.png")
    turns = [{"role": "system", "content": "You operate a web page."},
             {"role": "user", "content": "Click OK."}, {"role": "assistant", "content": "Action: click(x=1, y=2)"},
             {"role": "user", "content": "Now Cancel."}, {"role": "assistant", "content": "Action: click(x=3, y=4)"}]
    data = write(tmp_path / "rows.jsonl", [{"messages": turns, "images": ["s.png", "s.png"]},
                                           {"messages": turns[:3], "images": ["s.png"]}])
    run = prepare_sft(sft_config(data, vlm_dir, tmp_path / "out", batch_tokens=4096), read_sft_rows(data, "full"),
                      "full", vision=True)
    try:
        tokenizer = run.loaded.tokenizer.tokenizer
        batch = run.trainer.data_collator([run.trainer.train_dataset[i] for i in range(2)])
    finally:
        run.workdir.cleanup()
    start, end = tokenizer.convert_tokens_to_ids(["<|im_start|>", "<|im_end|>"])
    header = tokenizer("assistant\n", add_special_tokens=False)["input_ids"]
    vision_start = tokenizer.convert_tokens_to_ids("<|vision_start|>")
    assert (batch["input_ids"] == vision_start).sum(dim=1).tolist() == [2, 1]  # an image per user turn
    for ids, labels in zip(batch["input_ids"].tolist(), batch["labels"].tolist()):
        inside, spans, i = [False] * len(ids), 0, 0
        while i < len(ids):  # an assistant turn: its content, <|im_end|> and the newline after it
            if ids[i] == start and ids[i + 1:i + 1 + len(header)] == header:
                j = i + 1 + len(header)
                while ids[j] != end:
                    inside[j], j = True, j + 1
                inside[j] = inside[j + 1] = True
                spans, i = spans + 1, j
            i += 1
        assert spans in (1, 2)
        trained = [k for k, label in enumerate(labels) if label != -100]
        assert trained and all(inside[k] for k in trained)
        assert all(labels[k] == ids[k] for k in trained)
        assert all(labels[k] != -100 for k, flag in enumerate(inside) if flag and ids[k] != tokenizer.pad_token_id)


def test_sft_full_finetune_trains_the_vision_tower_and_keeps_the_contract(tmp_path, vlm_dir, sft_data, capsys):
    out = tmp_path / "out"
    metrics = train_sft(sft_config(sft_data, vlm_dir, out))
    progress = progress_lines(capsys.readouterr().out)
    assert [p["step"] for p in progress] == [1, 2, 3] and all(p["total"] == 3 for p in progress)
    assert all({"loss", "lr", "grad_norm", "epoch", "tokens_per_s"} <= set(p) for p in progress)
    assert metrics["steps"] == 3 and metrics["stopped_by"] == "max_steps" and metrics["warnings"] == []
    assert metrics["first_loss"] == pytest.approx(progress[0]["loss"], rel=1e-4)
    assert metrics["final_loss"] < metrics["first_loss"] and metrics["tokens_per_s"] > 0
    before, after = load_file(vlm_dir / "model.safetensors"), load_file(out / "model.safetensors")
    assert not torch.equal(before[VISION], after[VISION]) and not torch.equal(before[TEXT], after[TEXT])
    loupe = read_loupe(out)
    assert loupe["algorithm"] == "sft" and loupe["parent"] == str(vlm_dir.resolve()) and loupe["adapter"] is None
    assert json.loads((out / "metrics.json").read_text())["steps"] == 3
    # the PIL image processor here; where torchvision is installed (a CUDA machine) transformers picks its own
    assert type(load_processor(out).image_processor).__name__.startswith("Qwen2VLImageProcessor")


def test_sft_lora_saves_an_adapter_and_leaves_the_base_weights(tmp_path, vlm_dir, sft_data):
    out = tmp_path / "out"
    metrics = train_sft(sft_config(sft_data, vlm_dir, out, lora="r=4", lr=1e-2))
    assert metrics["steps"] == 3
    adapter = load_file(out / "adapter" / "adapter_model.safetensors")
    config = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert config["r"] == 4 and "language_model" in config["target_modules"]
    assert adapter and all(".lora_A." in k or ".lora_B." in k for k in adapter)
    assert not any("visual" in k for k in adapter)
    base, merged = load_file(vlm_dir / "model.safetensors"), load_file(out / "model.safetensors")
    scale = config["lora_alpha"] / config["r"]
    delta = adapter[ADAPTED_TEXT + ".lora_B.weight"] @ adapter[ADAPTED_TEXT + ".lora_A.weight"] * scale
    assert delta.abs().max() > 0  # the adapter learned something ...
    # ... and is all that moved (on CUDA the merged weights are saved in the bf16 they trained in)
    dtype = merged[TEXT].dtype
    torch.testing.assert_close(merged[TEXT], (base[TEXT] + delta).to(dtype))
    adapted = {k.replace("base_model.model.model.language_model.", "model.").replace(".lora_A.", ".") for k in adapter}
    assert all(torch.equal(base[k].to(merged[k].dtype), merged[k]) for k in base if k not in adapted)
    assert read_loupe(out)["adapter"] == "adapter"


@pytest.mark.parametrize("lora", ["", "r=4"])
def test_dpo_on_screenshot_pairs_runs_and_reports(tmp_path, vlm_dir, sft_data, capsys, lora):
    rows = [json.loads(line) for line in sft_data.read_text().splitlines()]
    pairs = [{"prompt": r["messages"][:2], "chosen": r["messages"][2:],
              "rejected": [{"role": "assistant", "content": "Action: click(x=1, y=1)"}], "images": r["images"]}
             for r in rows]
    data = write(tmp_path / "pairs.jsonl", pairs)
    out = tmp_path / "out"
    metrics = train_dpo(DPOConfig(data=str(data), init=str(vlm_dir), out=str(out), max_steps=2, log_every=1,
                                  warmup_steps=0, batch_tokens=4096, max_length=2048, threads=2, lora=lora,
                                  lr=1e-2 if lora else 2e-4))
    progress = progress_lines(capsys.readouterr().out)
    assert [p["step"] for p in progress] == [1, 2]
    assert all({"loss", "margin", "accuracy", "lr"} <= set(p) for p in progress)
    assert metrics["algorithm"] == "dpo" and metrics["steps"] == 2 and metrics["pairs"] == 2
    assert metrics["first_loss"] == pytest.approx(0.6931, abs=1e-3)  # log 2: the policy starts as the reference
    assert metrics["logp_margin_after"] > metrics["logp_margin_before"] and metrics["reward_margin"] > 0
    assert metrics["stopped_by"] == "max_steps" and read_loupe(out)["algorithm"] == "dpo"
    if lora:  # the adapter alone, without DPOTrainer's reference copy of it
        assert sorted(p.name for p in (out / "adapter").iterdir()) == [
            "README.md", "adapter_config.json", "adapter_model.safetensors"]


def test_sft_honours_max_epochs_and_max_seconds(tmp_path, vlm_dir, sft_data):
    epochs = train_sft(sft_config(sft_data, vlm_dir, tmp_path / "a", max_steps=50, max_epochs=1))
    assert epochs["steps"] == 2 and epochs["stopped_by"] == "max_epochs"
    assert epochs["warnings"] == ["Trained 2 steps, not 50: that is 1 passes over the 2 rows, and more would only "
                                  "memorise them. Collect more data for a longer training."]
    timed = train_sft(sft_config(sft_data, vlm_dir, tmp_path / "b", max_steps=50, max_seconds=1e-6))
    assert timed["steps"] == 1 and timed["stopped_by"] == "max_seconds"
    assert timed["warnings"][0].startswith("The time budget of 0 s cut training at step 1 of 50")
    assert (tmp_path / "b" / "model.safetensors").is_file()


def test_cli_sft_of_a_vlm_exits_0(tmp_path, vlm_dir, sft_data):
    out = tmp_path / "out"
    _, stdout, _ = trainer_run("sft", "--init", str(vlm_dir), "--data", str(sft_data), "--out", str(out),
                               "--max-steps", "2", "--threads", "2")
    lines = [json.loads(line) for line in stdout.splitlines()]  # stdout: JSON lines only
    assert [line["step"] for line in lines[:-1]] == [1, 2]
    assert lines[-1]["done"] is True and lines[-1]["metrics"]["steps"] == 2
    assert (out / "model.safetensors").is_file() and read_loupe(out)["algorithm"] == "sft"


def test_a_chat_template_trl_cannot_mark_for_answer_only_loss_is_refused_before_training(tmp_path, vlm_dir, sft_data):
    """Issue 36: TRL trains a VLM's answers alone by the template's {% generation %} marks, and marks only the
    templates it ships, character for character (the tiny VLM carries TRL's Qwen2.5-VL copy). Any other template
    made TRL raise a ValueError inside the trainer's set-up; it is now refused with what to do. A template with its
    own marks trains."""
    import shutil

    from trl.chat_template_utils import get_training_chat_template

    edited = tmp_path / "edited"
    shutil.copytree(vlm_dir, edited)
    template = (edited / "chat_template.jinja").read_text()
    (edited / "chat_template.jinja").write_text(template.replace("You are a helpful assistant.", "You are a GUI agent."))
    with pytest.raises(TrainerError, match=r"its chat template is not one TRL knows how to mark .* \{% generation %\}"):
        prepare_sft(sft_config(sft_data, edited, tmp_path / "out", max_steps=1), read_sft_rows(sft_data, "full"),
                    "full", vision=True)
    assert not (tmp_path / "out").exists()
    marked = get_training_chat_template(load_processor(vlm_dir)).replace("You are a helpful assistant.",
                                                                           "You are a GUI agent.")
    (edited / "chat_template.jinja").write_text(marked)
    run = prepare_sft(sft_config(sft_data, edited, tmp_path / "out", max_steps=1), read_sft_rows(sft_data, "full"),
                      "full", vision=True)
    run.workdir.cleanup()
