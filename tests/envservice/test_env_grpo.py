"""Whole-episode GRPO through TRL's environment_factory against a real environment service (trainer/env_grpo.py):
the tiny model, warm-started on one solved episode written as tool calls, plays enter-text (three steps) through
the service; the rewards come from the env at each episode's end, and the episodes are Loupe's, marked with the run."""
from __future__ import annotations

import inspect
import json

import pytest
import torch

from agent.solvers import solve_step
from envservice.client import EnvServiceClient, observation_of
from rollouts.models import Episode, EpisodeStatus, Step
from tests.envservice.conftest import TASK, TakenOverService
from trainer.configs import EnvRLConfig
from trainer.env_grpo import ServiceEnv, env_class, rows_of, tool_ready, train_env_grpo
from trainer.model import Loaded, build_tiny, save_checkpoint

pytestmark = pytest.mark.django_db(transaction=True)

SEED = 0


def solved_conversation(env: ServiceEnv, client: EnvServiceClient, config: EnvRLConfig) -> list[dict]:
    """The messages of one episode the scripted solver plays through the env's own tools, as TRL's loop writes them."""
    row = rows_of(config)[0]
    first = env.reset(seed=SEED)
    messages = [*row["prompt"][:-1], {"role": "user", "content": row["prompt"][-1]["content"] + first}]
    obs, history = observation_of(client.get(env._lease)["observation"]), []
    while not env._done:
        turn = solve_step(TASK, obs, history)
        history.append(turn)
        call = {"type": "function", "function": {"name": turn.action.name, "arguments": dict(turn.action.args)}}
        answer = getattr(env, turn.action.name)(**turn.action.args)
        messages += [{"role": "assistant", "content": "", "tool_calls": [call]},
                     {"role": "tool", "name": turn.action.name, "content": answer}]
        obs = observation_of(client.get(env._lease)["observation"])
    return messages + [{"role": "assistant", "content": "Done."}]


def warm_start(path, messages: list[dict], tools: list) -> None:
    """The tiny model taught one solved episode (the loss on its answers), so its tool calls parse and act."""
    from trl.chat_template_utils import get_training_chat_template, is_chat_template_prefix_preserving

    model, tokenizer = build_tiny(0)
    tool_ready(tokenizer, model)
    template = None if is_chat_template_prefix_preserving(tokenizer) else get_training_chat_template(tokenizer)

    def ids_of(upto: int, prompt: bool) -> list[int]:
        text = tokenizer.apply_chat_template(messages[:upto], tools=tools, tokenize=False, chat_template=template,
                                             add_generation_prompt=prompt)
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    ids = ids_of(len(messages), False)
    labels = [-100] * len(ids)
    for i, message in enumerate(messages):
        if message["role"] == "assistant":  # the answer's tokens: between its prompt and the next turn
            start, end = len(ids_of(i, True)), len(ids_of(i + 1, False))
            labels[start:end] = ids[start:end]
    ids, labels = torch.tensor([ids]), torch.tensor([labels])
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95))
    model.train()
    for _ in range(70):
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
    assert loss.item() < 0.1, f"the warm start did not learn its episode (loss {loss.item():.3f})"
    save_checkpoint(Loaded(model=model, tokenizer=tokenizer, parent=None, base_model="tiny", is_lora=False,
                           prompt_style="named"), path, algorithm="sft", config={}, data_sha256=None, metrics={})


def test_whole_episode_grpo_plays_through_the_service_rewards_from_the_env_episodes_marked_with_the_run(
        service, manager_token, tmp_path):
    url, svc = service
    project, token = manager_token
    config = EnvRLConfig(init=str(tmp_path / "warm"), out=str(tmp_path / "out"), env_service=url, token=token,
                         project=project.pk, task=TASK, seeds=str(SEED), run="grpo-test", max_steps=2, group_size=4, tools="click,type",
                         max_turns=6, max_new_tokens=1024, lr=1e-4, temperature=1.0, log_every=1, threads=1,
                         device="cpu", seed=0)
    client = EnvServiceClient(url, token)
    teacher = env_class(["click", "type"])(client, project=project.pk, task=TASK, run="warm-start", style="named", images=False,
                         void_reward=-0.1, stats={"leases": [], "episodes": [], "rewards": [], "env_steps": 0,
                                                  "void_turns": 0, "person_steps": 0})
    tools = [getattr(teacher, name) for name, _ in inspect.getmembers(type(teacher), inspect.isfunction)
             if name not in ("reset", "get_reward") and not name.startswith("_")]
    messages = solved_conversation(teacher, client, config)
    assert teacher.get_reward() == pytest.approx(1.0, abs=0.01)
    teacher._release()
    warm_start(tmp_path / "warm", messages, tools)

    metrics = train_env_grpo(config)

    assert metrics["steps"] == 2 and metrics["episodes"] == 8 and metrics["run"] == "grpo-test"
    played = list(Episode.objects.filter(rl_run="grpo-test").order_by("id"))
    assert [e.pk for e in played] == sorted(metrics["episode_ids"])
    by_id = dict(zip(metrics["episode_ids"], metrics["episode_rewards"]))
    for episode in played:  # each episode's reward is the env's, stored on its Episode
        assert episode.status == EpisodeStatus.FINISHED and episode.env_reward == pytest.approx(by_id[episode.pk])
    steps = {e.pk: Step.objects.filter(episode=e).count() for e in played}
    assert max(steps.values()) >= 2 and metrics["env_steps"] == sum(steps.values())
    assert max(metrics["episode_rewards"]) == pytest.approx(1.0, abs=0.01)  # the warm start solves some
    assert svc.status()["pools"][0]["leased"] == 0  # the run gave its leases back
    record = json.loads((tmp_path / "out" / "loupe.json").read_text())
    assert record["algorithm"] == "rl" and record["config"]["env_service"] == url


def test_a_vision_language_model_trains_with_the_screenshot_in_the_prompt_and_after_each_action(
        service, manager_token, tmp_path):
    from PIL import Image

    from trainer.tiny_vlm import save_tiny_vlm

    url, svc = service
    project, token = manager_token
    client = EnvServiceClient(url, token)
    env = env_class(["click"])(client, project=project.pk, task=TASK, run="vlm-test", style="named", images=True,
                               void_reward=-0.1, stats={"leases": [], "episodes": [], "rewards": [], "env_steps": 0,
                                                        "void_turns": 0, "person_steps": 0})
    first = env.reset(seed=1)
    after = env.click(x=5, y=5)
    for answer in (first, after):  # TRL's image-returning tool answer: the screenshot, then the screen as text
        assert isinstance(answer[0]["image"], Image.Image) and "The screen now:" in answer[1]["text"]
    env._release()

    save_tiny_vlm(tmp_path / "vlm")
    config = EnvRLConfig(init=str(tmp_path / "vlm"), out=str(tmp_path / "out"), env_service=url, token=token,
                         project=project.pk, task=TASK, seeds="1", run="vlm-test", max_steps=1, group_size=2,
                         tools="click,type", max_turns=2, max_new_tokens=32, lr=1e-4, log_every=1, threads=1,
                         device="cpu", seed=0)
    metrics = train_env_grpo(config)
    assert metrics["model"] == "vlm" and metrics["steps"] == 1 and metrics["episodes"] == 2
    assert Episode.objects.filter(rl_run="vlm-test").count() == 3  # the probe above and the run's two


def test_a_task_the_project_lacks_stops_the_run_with_the_services_words(service, manager_token, tmp_path):
    from trainer.model import TrainerError

    url, _ = service
    project, token = manager_token
    config = EnvRLConfig(init="tiny", out=str(tmp_path / "out"), env_service=url, token=token, project=project.pk,
                         task="no-such-task", seeds="0", max_steps=1, group_size=2, max_new_tokens=8, threads=1,
                         device="cpu")
    with pytest.raises(TrainerError, match=f"refused: 404: No task 'no-such-task' in project {project.pk}"):
        train_env_grpo(config)
    with pytest.raises(TrainerError, match="401"):
        train_env_grpo(EnvRLConfig(**{**config.__dict__, "token": "not-a-token"}))


def test_the_tool_answer_tells_the_model_what_a_person_did_when_they_took_over():
    stats = {"leases": [], "episodes": [], "rewards": [], "env_steps": 0, "void_turns": 0, "person_steps": 0}
    env = env_class(["click"])(TakenOverService(), project=1, task=TASK, run="r", style="named", images=False,
                               void_reward=-0.1, stats=stats)
    env.reset(seed=0)
    answer = env.click(x=3, y=3)
    assert answer.startswith('A person took over and acted: click(x=1, y=2); type(text="a").')
    assert (stats["person_steps"], stats["env_steps"]) == (2, 2)
