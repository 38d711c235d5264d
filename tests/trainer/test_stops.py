"""How a training run ends is said, not hidden: a few rows are not trained for hundreds of steps (max_epochs),
and a run its time budget cut says so (the cold start's quality must not depend silently on the machine)."""
import json

from trainer.configs import SFTConfig
from trainer.optim import lr_factor, planned_steps
from trainer.sft import train_sft


def rows_file(tmp_path, n: int):
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps({"messages": [
        {"role": "user", "content": f"Click the button {i}."},
        {"role": "assistant", "content": f"Thought: button {i}.\nAction: click(x={i}, y=5)"}]}) + "\n"
        for i in range(n)))
    return str(path)


def test_three_rows_are_trained_three_passes_not_two_hundred_steps_and_the_run_says_so(tmp_path):
    metrics = train_sft(SFTConfig(data=rows_file(tmp_path, 3), init="tiny", out=str(tmp_path / "ck"), max_steps=200,
                                  max_epochs=3, batch_tokens=4096, log_every=1, warmup_steps=0))
    assert metrics["steps"] == metrics["planned_steps"] == 3  # one batch holds the three rows
    assert metrics["stopped_by"] == "max_epochs"
    assert metrics["warnings"] == ["Trained 3 steps, not 200: that is 3 passes over the 3 rows, and more would only "
                                   "memorise them. Collect more data for a longer training."]


def test_a_run_its_time_budget_cuts_says_where_it_stopped(tmp_path):
    metrics = train_sft(SFTConfig(data=rows_file(tmp_path, 40), init="tiny", out=str(tmp_path / "ck"), max_steps=500,
                                  max_seconds=1, batch_tokens=256, log_every=5, warmup_steps=0))
    assert metrics["stopped_by"] == "max_seconds" and metrics["steps"] < 500
    [warning] = metrics["warnings"]
    assert warning.startswith(f"The time budget of 1 s cut training at step {metrics['steps']} of 500")


def test_without_a_cap_or_a_budget_the_run_takes_its_steps_quietly(tmp_path):
    metrics = train_sft(SFTConfig(data=rows_file(tmp_path, 3), init="tiny", out=str(tmp_path / "ck"), max_steps=4,
                                  batch_tokens=4096, log_every=2, warmup_steps=0))
    assert (metrics["steps"], metrics["stopped_by"], metrics["warnings"]) == (4, "max_steps", [])


def test_the_learning_rate_decays_over_the_planned_steps_not_the_asked_ones():
    config = SFTConfig(max_steps=200, max_epochs=2, warmup_steps=0)
    planned = planned_steps(config, batches_per_epoch=5)
    assert planned == 10
    assert lr_factor(planned, warmup=0, total=planned, schedule="cosine") == 0.1  # fully decayed at the end


def test_a_short_run_still_reports_enough_points_to_draw_its_loss_curve(tmp_path, capsys):
    train_sft(SFTConfig(data=rows_file(tmp_path, 3), init="tiny", out=str(tmp_path / "ck"), max_steps=200,
                        max_epochs=5, batch_tokens=4096, log_every=10, warmup_steps=0))
    steps = [json.loads(line)["step"] for line in capsys.readouterr().out.splitlines() if line.startswith('{"step"')]
    assert steps == [1, 2, 3, 4, 5]
