"""Row validation, the checkpoint format and the CLI contract (no browser needed)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from trainer import data as D
from trainer.model import TrainerError, build_tokenizer, chat_ids, load, read_loupe, save_checkpoint

ROOT = Path(__file__).resolve().parents[2]


def _write(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _sft_row(answer: str = "Thought: ok\nAction: click(x=1, y=2)") -> dict:
    return {"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "Instruction: go"},
                         {"role": "assistant", "content": answer}]}


def test_tokenizer_chat_template_round_trips_text():
    tokenizer = build_tokenizer()
    messages = [{"role": "user", "content": 'Click "Ökay" at (12, 34)\nnow'}]
    ids = chat_ids(tokenizer, messages, add_generation_prompt=True)
    assert tokenizer.decode(ids) == '<|user|>Click "Ökay" at (12, 34)\nnow<|end|><|assistant|>'
    assert ids[-1] == tokenizer.convert_tokens_to_ids("<|assistant|>")


def test_sft_labels_cover_assistant_turns_only():
    tokenizer = build_tokenizer()
    messages = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "xy"},
                {"role": "user", "content": "b"}, {"role": "assistant", "content": "z"}]
    example = D.sft_example(tokenizer, messages, max_length=1000)
    trained = tokenizer.decode([t for t in example.labels if t != D.IGNORE])
    assert trained == "xy<|end|>z<|end|>"
    assert len(example.labels) == len(example.input_ids)


def test_malformed_line_is_reported_with_its_number(tmp_path):
    path = _write(tmp_path / "bad.jsonl", [_sft_row(), _sft_row(), '{"messages": [', _sft_row()])
    with pytest.raises(TrainerError, match=r"bad\.jsonl:3: not valid JSON"):
        D.read_sft(path)
    path = _write(tmp_path / "role.jsonl", [_sft_row(), {"messages": [{"role": "robot", "content": "x"}]}])
    with pytest.raises(TrainerError, match=r"role\.jsonl:2: messages\[0\]: role must be one of"):
        D.read_sft(path)


def test_cli_exits_nonzero_with_line_number_on_malformed_jsonl(tmp_path):
    path = _write(tmp_path / "snap.jsonl", [_sft_row(), "not json at all"])
    proc = subprocess.run([sys.executable, "-m", "trainer", "sft", "--data", str(path), "--init", "tiny",
                           "--out", str(tmp_path / "ckpt"), "--max-steps", "2"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert f"{path}:2: not valid JSON" in proc.stderr
    assert not (tmp_path / "ckpt" / "model.safetensors").exists()
    missing = subprocess.run([sys.executable, "-m", "trainer", "sft", "--data", str(tmp_path / "nope.jsonl"),
                              "--out", str(tmp_path / "c2")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "does not exist" in missing.stderr


def test_cli_sft_prints_json_progress_and_writes_checkpoint(tmp_path):
    rows = [_sft_row(f"Thought: t\nAction: click(x={i}, y={2 * i})") for i in range(20)]
    path = _write(tmp_path / "sft.jsonl", rows)
    out = tmp_path / "ckpt"
    proc = subprocess.run([sys.executable, "-m", "trainer", "sft", "--data", str(path), "--init", "tiny",
                           "--out", str(out), "--max-steps", "6", "--log-every", "2", "--lr", "3e-3"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    progress = [line for line in lines if "step" in line]
    assert [p["step"] for p in progress] == [2, 4, 6] and all(p["total"] == 6 for p in progress)
    assert progress[-1]["loss"] < progress[0]["loss"]
    assert lines[-1]["done"] is True and lines[-1]["out"] == str(out)
    for name in ("model.safetensors", "config.json", "tokenizer.json", "loupe.json", "metrics.json"):
        assert (out / name).is_file(), name
    loupe = read_loupe(out)
    assert loupe["algorithm"] == "sft" and loupe["parent"] is None and loupe["base_model"] == "tiny"
    assert loupe["config"]["max_steps"] == 6 and len(loupe["data_sha256"]) == 64


def test_checkpoint_round_trip_gives_same_outputs(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    loaded = load("tiny", seed=3)
    messages = [{"role": "user", "content": "Instruction: Click on the \"OK\" button."}]
    ids = torch.tensor([chat_ids(loaded.tokenizer, messages, add_generation_prompt=True)])
    with torch.no_grad():
        before = loaded.model(input_ids=ids).logits
    save_checkpoint(loaded, tmp_path / "ck", algorithm="test", config={}, data_sha256=None, metrics={"x": 1})
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "ck", local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "ck", local_files_only=True).eval()
    assert tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False) == \
        loaded.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    with torch.no_grad():
        after = model(input_ids=ids).logits
    assert torch.allclose(before, after, atol=1e-6)
    greedy_a = loaded.model.generate(ids, max_new_tokens=8, do_sample=False)
    greedy_b = model.generate(ids, max_new_tokens=8, do_sample=False)
    assert greedy_a.tolist() == greedy_b.tolist()
    # the next run's parent is this checkpoint
    again = load(str(tmp_path / "ck"))
    assert again.parent == str((tmp_path / "ck").resolve()) and again.base_model == "tiny"


def test_lora_checkpoint_has_merged_weights_and_adapter(tmp_path):
    loaded = load("tiny", lora="r=4")
    save_checkpoint(loaded, tmp_path / "ck", algorithm="test", config={}, data_sha256=None, metrics={})
    assert (tmp_path / "ck" / "model.safetensors").is_file()
    assert (tmp_path / "ck" / "adapter" / "adapter_config.json").is_file()
    assert json.loads((tmp_path / "ck" / "adapter" / "adapter_config.json").read_text())["r"] == 4


def _rendered_row(target) -> dict:
    from agent.rows import SFTRow

    return SFTRow(messages=_sft_row()["messages"], rendered_for=target).to_dict()


def test_cli_refuses_rows_rendered_for_another_action_format_in_one_line(tmp_path):
    from agent.rows import RenderedFor

    path = _write(tmp_path / "uitars.jsonl", [_rendered_row(RenderedFor(action_format="uitars", reads_images=True))])
    proc = subprocess.run([sys.executable, "-m", "trainer", "sft", "--data", str(path), "--init", "tiny",
                           "--out", str(tmp_path / "ckpt"), "--max-steps", "2"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: {path}:1: the rows were rendered for uitars answers but the init checkpoint answers in "
                      "loupe; re-freeze the snapshot for this checkpoint"], proc.stderr
    assert not (tmp_path / "ckpt").exists()


def test_rendered_rows_are_used_as_they_are_or_refused_for_another_style_and_legacy_rows_restyled(tmp_path):
    from agent.rows import RenderedFor

    named = _write(tmp_path / "named.jsonl", [_rendered_row(RenderedFor(style="named"))])
    conversations = D.read_sft(named, init="tiny")
    assert D.restyle(conversations, "named") == (conversations, 0)
    full = _write(tmp_path / "full.jsonl", [_rendered_row(RenderedFor(style="full"))])
    with pytest.raises(TrainerError, match=rf"^{full}:1: the rows were rendered for the full prompt style but this run "
                                           r"trains in named; re-freeze the snapshot for this checkpoint$"):
        D.restyle(D.read_sft(full, init="tiny"), "named")
    pair = {"prompt": _sft_row()["messages"][:2], "chosen": [{"role": "assistant", "content": "a"}],
            "rejected": [{"role": "assistant", "content": "b"}], "rendered_for": {"action_format": "pyautogui"}}
    with pytest.raises(TrainerError, match=r"dpo\.jsonl:1: the rows were rendered for pyautogui answers"):
        D.read_dpo(_write(tmp_path / "dpo.jsonl", [pair]), init="tiny")
    from agent.prompt import SYSTEM_PROMPT

    legacy = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "Instruction: go"},
              {"role": "assistant", "content": "Thought: ok\nAction: wait()"}]
    (restyled,), changed = D.restyle(D.read_sft(_write(tmp_path / "legacy.jsonl", [{"messages": legacy}]), init="tiny"),
                                     "named")
    assert changed == 1 and restyled[1]["content"] == "Task: go"


def test_the_command_table_decides_the_model_kind_once_and_runs_what_it_names(tmp_path, monkeypatch):
    """cli.COMMANDS: every command names a function that exists; whether --init reads images is decided in one place
    (the config's reads_images, through configs.reads_images), and reaches the launch check and the command alike
    (sft's rows are read for that kind, rl of either kind runs trainer/grpo.py)."""
    import importlib

    from trainer import cli, configs, distributed

    for name, command in cli.COMMANDS.items():
        module, _, function = command.target.partition(":")
        assert callable(getattr(importlib.import_module(module), function)), (name, command.target)
    asked, ran, launched = [], [], []
    monkeypatch.setattr(configs, "reads_images", lambda init: asked.append(init) or init == "a-vlm")
    monkeypatch.setattr(distributed, "check_launch", lambda command, vision: launched.append((command, vision)))
    monkeypatch.setitem(sys.modules, "fake_trainers", type(sys)("fake_trainers"))
    sys.modules["fake_trainers"].sft = lambda config: ran.append(("sft", config.reads_images)) or {}
    sys.modules["fake_trainers"].rl = lambda config: ran.append(("rl", config.reads_images)) or {}
    monkeypatch.setitem(cli.COMMANDS, "sft", cli.Command(cli.CONFIGS["sft"], "sft", "fake_trainers:sft"))
    monkeypatch.setitem(cli.COMMANDS, "rl", cli.Command(cli.CONFIGS["rl"], "rl", "fake_trainers:rl"))
    out = str(tmp_path / "out")
    for init in ("a-vlm", "tiny"):
        assert cli.main(["sft", "--init", init, "--data", "rows.jsonl", "--out", out]) == 0
        assert cli.main(["rl", "--init", init, "--data", "rows.jsonl", "--out", out]) == 0
    assert asked == ["a-vlm"] * 4 + ["tiny"] * 4  # the launch check's and the command's, from the one function
    assert ran == [("sft", True), ("rl", True), ("sft", False), ("rl", False)]
    assert launched == [("sft", True), ("rl", True), ("sft", False), ("rl", False)]
