"""GRPO of the tiny vision-language model through TRL (trainer/grpo.py): rule rewards on actions, rewards from the
real MiniWoB env, and the trainer's contract (progress lines, metrics, checkpoint, exit status 2 on bad rows)."""

import base64
import json
from pathlib import Path

import pytest
import torch
from PIL import Image, ImageDraw
from safetensors.torch import load_file

from agent import formats
from agent.actions import Action
from agent.envs import make_env
from trainer import cli
from trainer.configs import RLConfig, SFTConfig
from trainer.model import read_loupe
from trainer.sft import train_sft
from trainer.tiny_vlm import save_tiny_vlm
from trainer.grpo import prepare_grpo, read_rows, train_prepared
from trainer.rewards import AnswerReward, Envs

VISION = "visual.blocks.0.attn.qkv.weight"  # a weight of the vision tower, as the checkpoint names it
SYSTEM = {"role": "system", "content": "You operate a web page."}


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def button_row(i: int, **reward) -> dict:
    """A step on screen ``i`` (a blue button at x 20+30i..60+30i, y 40..60) in Loupe's format."""
    x0 = 20 + 30 * i
    return {"messages": [SYSTEM, {"role": "user", "content": "Click the button."}], "images": [f"images/s{i}.png"],
            "format": "loupe", "width": 160, "height": 210,
            "reward": reward or {"kind": "action", "action": f"click(x={x0 + 20}, y=50)", "box": [x0, 40, x0 + 40, 60]}}


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """Four screens with a button each, as RL rows (rl.jsonl) and as SFT rows with the right click (sft.jsonl)."""
    root = tmp_path_factory.mktemp("grpo")
    (root / "images").mkdir()
    rows = []
    for i in range(4):
        image = Image.new("RGB", (160, 210), "white")
        ImageDraw.Draw(image).rectangle([20 + 30 * i, 40, 60 + 30 * i, 60], fill=(0, 0, 200))
        image.save(root / "images" / f"s{i}.png")
        rows.append(button_row(i))
    write(root / "rl.jsonl", rows)
    write(root / "sft.jsonl", [{**r, "messages": r["messages"] + [
        {"role": "assistant", "content": "Action: " + r["reward"]["action"]}]} for r in rows])
    return root


@pytest.fixture(scope="module")
def init(data) -> Path:
    return save_tiny_vlm(data / "init")


@pytest.fixture(scope="module")
def warm(data, init) -> Path:
    """The tiny VLM after 40 SFT steps on the right clicks: it writes readable clicks, and which button it clicks
    varies from sample to sample, so a group's answers score 1 and 0 (a real reward signal)."""
    train_sft(SFTConfig(data=str(data / "sft.jsonl"), init=str(init), out=str(data / "warm"), max_steps=40, lr=1e-2,
                        warmup_steps=0, batch_tokens=8192, max_length=2048, threads=1, log_every=40))
    return data / "warm"


def rl_config(data: Path, init: Path, out: Path, **kw) -> RLConfig:
    kw = {"advantage": "grpo", "max_steps": 2, "log_every": 1, "lr": 1e-3, "warmup_steps": 0, "group_size": 4,
          "batch_tokens": 4096, "max_length": 2048, "max_new_tokens": 20, "threads": 1, "ppo_epochs": 1, **kw}
    return RLConfig(data=str(data), init=str(init), out=str(out), **kw)


def progress_lines(text: str) -> list[dict]:
    return [line for line in map(json.loads, text.splitlines()) if "step" in line]


def test_action_rewards_judge_kind_point_and_text_in_each_format(tmp_path, data):
    uitars = formats.render("The OK button.", Action("click", {"x": 45, "y": 50}), format="uitars", width=160,
                            height=210)
    assert "start_box" in uitars  # the answer as UI-TARS-1.5 writes it, on its resized grid
    qwen = formats.render("", Action("click", {"x": 150, "y": 200}), format="qwen-relative", width=160, height=210)
    element = {"kind": "action", "action": "click(x=40, y=50)",
               "element": {"x": 40, "y": 50, "width": 40, "height": 20}}  # centre and size, as observations give
    rows = [{**button_row(0), "format": "uitars"},
            {**button_row(0, **element), "format": "qwen-relative"},
            button_row(1, kind="action", action='type(text="hello  world")'),
            button_row(1, kind="action", action='hotkey(keys="ctrl+a")')]
    del rows[1]["width"], rows[1]["height"]  # read off the image
    prompts, steps = read_rows(write(data / "judge.jsonl", rows))
    assert [p["row"] for p in prompts] == [1, 2, 3, 4] and (steps[2].width, steps[2].height) == (160, 210)
    shares = []
    reward = AnswerReward(steps, void_reward=-0.1, envs=Envs())
    answers = [(uitars, 1, 1.0), ("Action: click(start_box='(5,5)')", 1, 0.0), ("Thought: hm", 1, -0.1),
               (qwen, 2, 0.0), ("Action: click(x=40, y=50)", 4, 0.0),
               ('Action: type(text=" hello world ")', 3, 1.0), ('Action: type(text="hello")', 3, 0.0),
               ('Action: hotkey(keys="Ctrl + A")', 4, 1.0), ("Action: wait()", 3, 0.0)]  # (answer, line, reward)
    got = reward([None] * len(answers), [[{"role": "assistant", "content": a}] for a, _, _ in answers],
                 row=[i for _, i, _ in answers], log_metric=lambda name, value: shares.append((name, value)))
    assert got == pytest.approx([want for _, _, want in answers])
    assert shares == [("void", pytest.approx(1 / len(answers)))]
    assert (reward.answers, reward.void, reward.rewarded) == (len(answers), 1, 3)
    inside = formats.render("", Action("click", {"x": 40, "y": 50}), format="qwen-relative", width=160, height=210)
    assert reward([None], [[{"role": "assistant", "content": inside}]], row=[2]) == [1.0]


def test_grpo_full_finetune_through_the_cli_reports_rewards_and_moves_the_vision_tower(tmp_path, data, warm, capsys):
    out = tmp_path / "out"
    code = cli.main(["rl", "--init", str(warm), "--data", str(data / "rl.jsonl"), "--out", str(out),
                     "--advantage", "grpo", "--max-steps", "2", "--log-every", "1", "--lr", "1e-3", "--warmup-steps",
                     "0", "--group-size", "4", "--batch-tokens", "4096", "--max-length", "2048", "--max-new-tokens",
                     "20", "--threads", "1", "--ppo-epochs", "1", "--kl-coef", "0.05"])
    assert code == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]  # stdout: JSON lines only
    progress, done = lines[:-1], lines[-1]
    assert [p["step"] for p in progress] == [1, 2] and all(p["total"] == 2 for p in progress)
    assert all({"loss", "reward", "reward_std", "void", "kl", "lr"} <= set(p) for p in progress)
    metrics = done["metrics"]
    assert done["done"] is True and metrics == json.loads((out / "metrics.json").read_text())
    assert metrics["algorithm"] == "rl" and metrics["model"] == "vlm" and metrics["steps"] == 2
    assert metrics["answers"] == 2 * 2 * 4  # 2 steps of 2 prompts (4096 / 2048) x 4 answers
    # the signal is real: some answers were right and some not, within a group
    assert 0 < metrics["answers_rewarded"] < metrics["answers"] and any(p["reward_std"] > 0 for p in progress)
    assert metrics["reward_first"] == pytest.approx(progress[0]["reward"], abs=1e-5)
    assert metrics["stopped_by"] == "max_steps" and "final_kl" in metrics
    before, after = load_file(warm / "model.safetensors"), load_file(out / "model.safetensors")
    assert not torch.equal(before[VISION], after[VISION])
    loupe = read_loupe(out)
    assert loupe["algorithm"] == "rl" and loupe["config"]["advantage"] == "grpo" and loupe["adapter"] is None


def test_grpo_loads_the_model_on_this_ranks_device_after_its_trl_config(tmp_path, data, init, monkeypatch):
    """Issue 36: every rank of a multi-GPU GRPO run loaded its model onto cuda:0, before GRPOConfig existed (so
    under ZeRO-3 not partitioned either). The CPU shows the order and which device the model is given: the one
    distributed.device_of picks for this rank (cuda:LOCAL_RANK under torchrun), made after the TRL config."""
    import trainer.grpo as G

    events = []
    picked = torch.device("cpu", 0)  # a device no plain resolve_device("cpu") would give

    class Config(G.GRPOConfig):
        def __post_init__(self):
            events.append("config")
            super().__post_init__()

    def device_of(device):
        events.append(f"device_of({device})")
        return picked

    def load_model(config, device, *args, **kwargs):
        events.append(f"model on {device}")
        return real_load(config, torch.device("cpu"), *args, **kwargs)

    real_load = G.load_model
    monkeypatch.setattr(G, "GRPOConfig", Config)
    monkeypatch.setattr(G.distributed, "device_of", device_of)
    monkeypatch.setattr(G, "load_model", load_model)
    run = prepare_grpo(rl_config(data / "rl.jsonl", init, tmp_path / "out", max_steps=1))
    run.close()
    assert events == ["device_of(cpu)", "config", f"model on {picked}"]


def test_grpo_loss_falls_on_the_answer_tokens_only(tmp_path, data, warm):
    config = rl_config(data / "rl.jsonl", warm, tmp_path / "out", max_steps=1)
    run = prepare_grpo(config)
    model = run.trainer.model
    tokenizer = run.loaded.tokenizer.tokenizer
    norm = next(m for name, m in model.named_modules() if name.endswith("language_model.norm"))
    calls, grads = [], []

    def keep_inputs(module, args, kwargs):
        if torch.is_grad_enabled() and kwargs.get("fused_lm_head"):  # the forward the loss is taken from
            calls.append({k: kwargs[k].detach().clone() for k in ("input_ids", "attention_mask", "labels")})

    def keep_grad(module, args, output):
        if torch.is_grad_enabled() and output.requires_grad:
            output.register_hook(lambda grad: grads.append(grad.detach().clone()))

    hooks = [model.register_forward_pre_hook(keep_inputs, with_kwargs=True), norm.register_forward_hook(keep_grad)]
    try:
        train_prepared(run, config)
    finally:
        for hook in hooks:
            hook.remove()
    assert len(calls) == 1 and len(grads) == 1  # one step, one loss
    (call,), (grad,) = calls, grads
    header = tokenizer.convert_tokens_to_ids(["<|im_start|>"]) + tokenizer("assistant\n", add_special_tokens=False)[
        "input_ids"]
    for ids, mask, labels, row_grad in zip(call["input_ids"].tolist(), call["attention_mask"].tolist(),
                                           call["labels"].tolist(), grad):
        starts = [j for j in range(len(ids)) if ids[j:j + len(header)] == header]
        answer = starts[-1] + len(header)  # the answer begins after the prompt's last "<|im_start|>assistant\n"
        scored = {j for j, label in enumerate(labels) if label != -100}
        assert scored == {j for j in range(answer, len(ids)) if mask[j]}  # the sampled tokens, not the padding
        assert all(labels[j] == ids[j] for j in scored)
        # the final hidden states get gradient only where they predict an answer token (position j predicts j + 1)
        moved = {j for j in range(len(ids)) if row_grad[j].abs().sum() > 0}
        assert moved <= {j - 1 for j in scored}
    assert grad.abs().sum() > 0


def test_grpo_with_lora_trains_the_adapter_only(tmp_path, data, warm):
    out = tmp_path / "out"
    config = rl_config(data / "rl.jsonl", warm, out, lora="r=4", lr=1e-2, kl_coef=0.05)
    metrics = train_prepared(prepare_grpo(config), config)
    assert metrics["steps"] == 2 and (out / "metrics.json").is_file()
    adapter = load_file(out / "adapter" / "adapter_model.safetensors")
    assert any(k.endswith("lora_B.weight") and v.abs().sum() > 0 for k, v in adapter.items())  # B starts at zero
    assert not any(".ref." in k for k in adapter)  # the KL reference copy is not saved
    before, after = load_file(warm / "model.safetensors"), load_file(out / "model.safetensors")
    assert torch.equal(before[VISION], after[VISION])  # LoRA adapts the language model's linear layers
    assert read_loupe(out)["adapter"] == "adapter"


def test_grpo_stops_when_max_seconds_are_spent_and_says_so(tmp_path, data, warm):
    config = rl_config(data / "rl.jsonl", warm, tmp_path / "out", max_steps=50, max_seconds=1e-6)
    metrics = train_prepared(prepare_grpo(config), config)
    assert metrics["steps"] == 1 and metrics["stopped_by"] == "max_seconds"
    assert metrics["warnings"][0].startswith("The time budget of 0 s cut training at step 1 of 50")
    assert (tmp_path / "out" / "model.safetensors").is_file()


@pytest.mark.browser
@pytest.mark.timeout(300)
def test_env_reward_resets_replays_and_steps_the_real_miniwob_env(tmp_path, warm):
    env = make_env("miniwob")
    try:
        observation = env.reset("click-button", 2)
    finally:
        env.close()
    wanted = observation.instruction.split('"')[1]
    target = next(e for e in observation.elements if e.role == "button" and e.text == wanted)
    other = next(e for e in observation.elements if e.role == "button" and e.text != wanted)
    screen = "data:image/jpeg;base64," + base64.b64encode(observation.screenshot).decode()
    row = {"messages": [SYSTEM, {"role": "user", "content": observation.instruction}], "images": [screen],
           "format": "loupe", "width": 160, "height": 210,
           "reward": {"kind": "env", "env": "miniwob", "task": "click-button", "seed": 2, "prefix": []}}
    ended = {**row, "reward": {**row["reward"], "prefix": [f"click(x={target.x}, y={target.y})"]}}
    data = write(tmp_path / "env.jsonl", [row, ended])
    config = rl_config(data, warm, tmp_path / "out", max_steps=1, group_size=2, batch_tokens=2048)
    run = prepare_grpo(config)
    live, after_prefix = run.reward.steps[1], run.reward.steps[2]
    assert run.reward.score(f"Action: click(x={target.x}, y={target.y})", live)[0] >= 0.9  # the env's own reward
    assert run.reward.score(f"Action: click(x={other.x}, y={other.y})", live) == (-1.0, False)  # MiniWoB's miss
    assert run.reward.score("no action here", live) == (-0.1, True)  # void: the env is not touched
    assert (run.reward.envs.episodes, run.reward.envs.steps, run.reward.envs.failures) == (2, 2, 0)
    # the prefix ran for real: its click ended the episode, so the answer cannot run: 0, counted, not raised
    assert run.reward.score(f"Action: click(x={target.x}, y={target.y})", after_prefix) == (0.0, False)
    assert (run.reward.envs.episodes, run.reward.envs.steps, run.reward.envs.failures) == (3, 3, 1)
    metrics = train_prepared(run, config)
    assert metrics["answers"] == 2  # one prompt, two answers, one step
    stepped = metrics["answers"] - metrics["void_answers"]
    assert metrics["env_episodes"] == metrics["env_steps"] == 3 + stepped


@pytest.mark.parametrize("change, message", [
    ({"images": []}, "rl.jsonl:1: an RL row needs 'images' for a vision-language model: the screenshot the answer"),
    ({"format": "ui-tars"}, "rl.jsonl:1: unknown answer format 'ui-tars'; expected one of: loupe, uitars"),
    ({"reward": {"kind": "click"}}, "rl.jsonl:1: unknown reward kind 'click'; expected one of: action, env"),
    ({"reward": {"kind": "action", "action": "click(x=1, y=2)"}}, "rl.jsonl:1: reward: a click is judged by where"),
    ({"width": 1280}, "rl.jsonl:1: images[0]: width x height say 1280x210 but the screenshot is 160x210"),
    ({"reward": {"kind": "env", "env": "gameboy", "task": "click-button", "seed": 1}},
     "rl.jsonl:1: reward: the gameboy env cannot start click-button (seed 1): unknown env kind 'gameboy'"),
    ({"reward": {"kind": "env", "env": "miniwob", "task": "click-nothing", "seed": 1}},
     "rl.jsonl:1: reward: the miniwob env cannot start click-nothing (seed 1): unknown MiniWoB++ task"),
])
def test_bad_rows_exit_2_with_one_plain_line(tmp_path, data, init, change, message, capsys):
    rows = [{**button_row(0), **change}]
    rows[0]["images"] = [str(data / p) for p in rows[0]["images"]]
    path = write(tmp_path / "rl.jsonl", rows)
    code = cli.main(["rl", "--init", str(init), "--data", str(path), "--out", str(tmp_path / "out"),
                     "--advantage", "grpo"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err.startswith("error: ") and message in captured.err and captured.err.count("\n") == 1


def test_ppo_and_a_group_of_one_are_refused_saying_what_to_do(tmp_path, data, init, capsys):
    base = ["rl", "--init", str(init), "--data", str(data / "rl.jsonl"), "--out", str(tmp_path / "out")]
    assert cli.main([*base, "--advantage", "gae"]) == 2
    assert "--advantage gae: PPO with a critic has no trainer here" in capsys.readouterr().err
    assert cli.main([*base, "--group-size", "1"]) == 2
    assert "--group-size must be at least 2" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_vllm_generation_is_a_setting_refused_where_it_cannot_run(tmp_path, data, init, capsys, monkeypatch):
    """--vllm colocate | server maps onto TRL's use_vllm / vllm_mode / vllm_server_base_url. vLLM cannot run here
    (no GPU, and it is not in Loupe's venv): a CPU run, or a process without vLLM, exits 2 saying why."""
    from trl import import_utils

    from trainer.grpo import check_vllm, vllm_args

    argv = ["rl", "--init", str(init), "--data", str(data / "rl.jsonl"), "--out", str(tmp_path / "out"),
            "--advantage", "grpo", "--vllm", "colocate"]
    assert cli.main(argv) == 2
    assert "--vllm colocate: vLLM generates on GPUs, and this run trains on the CPU" in capsys.readouterr().err
    config = rl_config(data / "rl.jsonl", init, tmp_path / "out", vllm="server", device="cuda")
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr(import_utils, "is_vllm_available", lambda *a, **k: False)
    with pytest.raises(Exception, match="--vllm server: vLLM is not installed in this environment"):
        check_vllm(config)
    monkeypatch.setattr(import_utils, "is_vllm_available", lambda *a, **k: True)
    check_vllm(config)
    assert vllm_args(config) == {"use_vllm": True, "vllm_mode": "server",
                                 "vllm_server_base_url": "http://127.0.0.1:8000"}
    assert vllm_args(rl_config(data / "rl.jsonl", init, tmp_path / "out", vllm="colocate")) == \
        {"use_vllm": True, "vllm_mode": "colocate"}
    assert vllm_args(rl_config(data / "rl.jsonl", init, tmp_path / "out")) == {}
    assert not (tmp_path / "out").exists()
