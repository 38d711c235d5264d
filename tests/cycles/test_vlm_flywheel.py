"""A screen-reading checkpoint through the whole flywheel (issue 19): a tiny Qwen2.5-VL (trainer/tiny_vlm.py) in
UI-TARS's format, served by a real `python -m trainer serve` on the `openai` backend, is steered live by a person over
the WebSocket (an edit in Loupe's grammar, a takeover); the snapshots render that episode for it (screenshots per user
turn, UI-TARS answers that parse back to the stored actions); a cycle trains a LoRA adapter with TRL, evaluates it and
the deployed checkpoint in the real MiniWoB env, a manager approves it over the gate's 0-vs-0 verdict, and the deploy
loads the adapter into the running server under a new name; the next episode acts with it. A second cycle fine-tunes
all weights (SFT then DPO) and loads them whole.

Its own module: one serve process, daphne and two Celery workers (live,rollouts and default,train) for the test."""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from agent.actions import Action, Turn
from agent.formats import parse
from training import deployments
from rollouts.models import Checkpoint, Episode, EpisodeStatus
from training.models import TrainingRun
from demo.simulated_annotators import Api, Socket
from tests.factories import PASSWORD, make_member, make_project, make_user
from tests.stack import (ProcessStack, stack_env, start_daphne, start_policy_server, start_together, start_worker,
                         trainer_start, wait_for, worker_quiet)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser, pytest.mark.slow,
              pytest.mark.timeout(900)]

SERVED = "tiny-vlm"
ANSWER_TOKENS = 8  # the untrained model writes noise: 8 tokens of it are as void as 384


class Proxy(BaseHTTPRequestHandler):
    """Between Loupe (rollout worker, deploys) and trainer serve: records every request (path, body) and caps the
    answer at ANSWER_TOKENS (the worker asks UI-TARS for 384: a plan and an action)."""

    target = ""
    requests: list[tuple[str, dict]] = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Proxy.requests.append((self.path, body))
        sent = {**body, "max_tokens": ANSWER_TOKENS} if self.path.endswith("/chat/completions") else body
        forwarded = urllib.request.Request(Proxy.target + self.path, headers={"Content-Type": "application/json"},
                                           data=json.dumps(sent).encode())
        try:
            with urllib.request.urlopen(forwarded, timeout=600) as response:
                status, data, kind = response.status, response.read(), response.headers.get("Content-Type")
        except urllib.error.HTTPError as exc:
            status, data, kind = exc.code, exc.read(), exc.headers.get("Content-Type")
        self.send_response(status)
        self.send_header("Content-Type", kind or "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def vlm_stack(module_stack, tmp_path_factory):
    """(daphne base URL, base VLM dir, serve log) with trainer serve behind the recording proxy, daphne and the
    workers all pointed at the proxy. The tiny VLM is built and served (two torch processes, one after the other)
    while daphne and the workers start: the proxy is up first, and learns the server's address once it serves."""
    stack, path = module_stack
    folder = tmp_path_factory.mktemp("vlm")
    serve_log = folder / "serve.log"
    Proxy.target = ""
    serving: dict = {}

    def serve_up():
        from trainer.tiny_vlm import save_tiny_vlm

        save_tiny_vlm(folder / "base")
        with open(serve_log, "wb") as log:
            serving["process"] = serve = trainer_start(
                "serve", "--init", str(folder / "base"), "--port", "0", "--name", SERVED,
                "--max-new-tokens", str(ANSWER_TOKENS), "--threads", "1", stderr=log)
        line = serve.stdout.readline()
        assert line.startswith("{"), serve_log.read_text()[-2000:]
        Proxy.target = json.loads(line)["serving"].removesuffix("/v1")

    proxy = start_policy_server(Proxy)
    try:
        env = stack_env(LOUPE_OPENAI_BASE_URL=f"http://127.0.0.1:{proxy.server_address[1]}/v1",
                        LOUPE_OPENAI_SERVER="loupe",  # trainer serve loads the full cycle's whole checkpoint
                        LOUPE_OPENAI_RETRIES=0, LOUPE_OPENAI_TIMEOUT_SECONDS=300,
                        LOUPE_CHECKPOINT_DIR=tmp_path_factory.mktemp("checkpoints"))
        _, base, _, _ = start_together(
            serve_up,
            lambda: start_daphne(stack, path, env),  # a manager's approval deploys from the web process
            lambda: start_worker(stack, path, env, queues="live,rollouts", name="live"),
            lambda: start_worker(stack, path, env, queues="default,train", name="train"))
        yield base, folder / "base", serve_log, stack
    finally:
        proxy.shutdown()
        if "process" in serving:
            serving["process"].terminate()
            serving["process"].wait(timeout=30)


def steer(base: str, api: Api, project_id: int, task: dict, seed: int) -> dict:
    """A person supervises one episode over the live socket: edits the first proposal to the solver's click (in
    Loupe's grammar), takes over the next one and acts, hands back, until the episode ends. Returns what they did."""
    from agent.envs import make_env
    from agent.solvers import solve_step

    episode = api.call("POST", f"/api/v1/projects/{project_id}/episodes/",
                       {"task": task["id"], "seeds": [seed], "mode": "supervised"})["results"][0]
    env = make_env("miniwob")  # the person's own view of the page, replaying what executes
    observation = env.reset(task["task_name"], seed)
    socket, history, done = Socket(base, api.token, episode["id"]), [], {"edit": None, "act": None, "errors": []}
    answered: set[tuple] = set()
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            message = socket.receive(max(1.0, deadline - time.monotonic()))
            kind, data = message.get("type"), message.get("data") or {}
            if kind == "error":
                done["errors"].append(data.get("message"))
            if kind == "episode.finished":
                break
            if kind == "step.executed" and data.get("action"):
                action = Action.from_dict(data["action"])
                observation = env.step(action).observation
                history.append(Turn(thought=data.get("thought", ""), action=action, void_reason=None,
                                    raw=data.get("action_text", "")))
                if data.get("actor") == "human":
                    socket.send("handback")
                continue
            if kind != "step.proposed" or (data["index"], data.get("reason", "")) in answered:
                continue
            answered.add((data["index"], data.get("reason", "")))
            turn = solve_step(task["task_name"], observation, history)
            if data.get("reason") == "takeover":
                done["act"] = (data["index"], turn.action.to_dict())
                socket.send("act", action=turn.action.to_text(), thought=turn.thought)
            elif done["edit"] is None:
                done["edit"] = (data["index"], turn.action.to_dict())
                socket.send("edit", index=data["index"], thought=turn.thought, action=turn.action.to_text())
            else:
                socket.send("takeover")
        else:
            raise AssertionError(f"episode {episode['id']} did not end in 240 s: {done}")
    finally:
        socket.close()
        env.close()
    return {"episode": episode["id"], **done}


def wait_episode(episode_id: int, stack: ProcessStack) -> Episode:
    wait_for(lambda: Episode.objects.get(pk=episode_id).status in (EpisodeStatus.FINISHED, EpisodeStatus.FAILED),
             timeout=180, interval=0.5, what=f"episode {episode_id}\n{stack.tail()}")
    return Episode.objects.get(pk=episode_id)


def run_cycle(api: Api, project_id: int, stack: ProcessStack) -> dict:
    cycle = api.call("POST", f"/api/v1/projects/{project_id}/cycles/")
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        cycle = api.call("GET", f"/api/v1/cycles/{cycle['id']}/")
        if cycle["state"] in ("deployed", "rejected", "skipped", "failed"):
            return cycle
        time.sleep(1)
    raise AssertionError(f"cycle still {cycle['state']} after 600 s\n{stack.tail()}")


def next_episode_asks_for(api: Api, project_id: int, task: dict, seed: int, stack: ProcessStack,
                          checkpoint: str, served: str) -> None:
    """An autonomous episode started now acts with ``checkpoint``: its steps record it, the server is asked for
    ``served``."""
    asked = len(Proxy.requests)
    started = api.call("POST", f"/api/v1/projects/{project_id}/episodes/",
                       {"task": task["id"], "seeds": [seed], "mode": "autonomous"})["results"][0]
    episode = wait_episode(started["id"], stack)
    assert episode.status == EpisodeStatus.FINISHED and episode.checkpoint.name == checkpoint, episode.end_reason
    steps = list(episode.steps.all())
    assert steps and {s.checkpoint.name for s in steps} == {checkpoint}
    models = [body["model"] for path, body in Proxy.requests[asked:] if path.endswith("/chat/completions")]
    assert models and set(models) == {served}, models


def test_a_reading_checkpoint_turns_the_flywheel_lora_then_full(vlm_stack, tmp_path):
    base, vlm_dir, serve_log, stack = vlm_stack
    Proxy.requests = []
    timings, started = {}, time.monotonic()
    project = make_project("VLM flywheel")
    make_member(project, make_user("lead"), "admin")
    make_member(project, make_user("ann"), "annotator")
    lead, ann, pid = Api(base, "lead", PASSWORD), Api(base, "ann", PASSWORD), project.pk

    # 1. the tiny VLM registered in UI-TARS's format and deployed on the openai backend, as trainer serve runs it
    registered = lead.call("POST", f"/api/v1/projects/{pid}/checkpoints/",
                           {"name": "base", "uri": str(vlm_dir), "action_format": "uitars"})
    assert registered["action_format"] == "uitars" and registered["reads_images"] is True
    deployments.deployment_promote(project=project, checkpoint=Checkpoint.objects.get(pk=registered["id"]),
                                   backend="openai", served_name=SERVED)
    train = lead.call("POST", f"/api/v1/projects/{pid}/tasks/", {"task_name": "click-option", "split": "train",
                                                                  "seed_start": 0, "seed_end": 999, "max_steps": 4})
    lead.call("POST", f"/api/v1/projects/{pid}/tasks/", {"task_name": "click-test", "split": "eval",
                                                          "seed_start": 100_000, "seed_end": 100_099, "max_steps": 1})
    lead.call("PATCH", f"/api/v1/projects/{pid}/cycle-settings", {
        "history_images": 1, "backend": "openai", "export": "lora", "base_checkpoint": registered["id"],
        "min_new_rows": 1, "eval_seeds": 2, "margin": 0.0,
        "recipe": [{"algorithm": "sft", "max_steps": 2, "lr": 0.001, "lora": "r=4"}]})

    # 2. a person steers a supervised episode live: an edit on the first proposal, a takeover after
    did = steer(base, ann, pid, train, seed=3)
    episode = wait_episode(did["episode"], stack)
    timings["supervised episode"] = round(time.monotonic() - started, 1)
    assert episode.status == EpisodeStatus.FINISHED and (episode.env_reward or 0) > 0.5, (episode.end_reason, did)
    steps = {s.index: s for s in episode.steps.all()}
    edit_index, edited = did["edit"]
    assert steps[edit_index].actor == "edited" and steps[edit_index].action == edited
    assert did["act"] is not None and steps[did["act"][0]].actor == "human"
    assert steps[edit_index].proposal and steps[edit_index].action_format == "uitars"

    # 3. snapshots rendered for the deployed reader: screenshots per user turn, UI-TARS answers
    frozen = {}
    for kind in ("sft", "dpo"):
        snapshot = lead.call("POST", f"/api/v1/projects/{pid}/snapshots/", {"kind": kind, "filter": {"split": "train"}})
        wait_for(lambda s=snapshot: lead.call("GET", f"/api/v1/snapshots/{s['id']}/")["status"] == "ready", 120,
                 interval=0.5, what=f"the {kind} snapshot\n{stack.tail()}")
        frozen[kind] = lead.call("GET", f"/api/v1/snapshots/{snapshot['id']}/rows?limit=50")["rows"]
    sft = {row["meta"]["step_index"]: row for row in frozen["sft"]}
    assert sorted(sft) == sorted(steps)
    for index, row in sft.items():
        # the tiny VLM's processor limits (its processor_config.json): rows are written on the grid it sees
        assert row["rendered_for"] == {"style": row["rendered_for"]["style"], "action_format": "uitars",
                                       "reads_images": True, "history_images": 1, "min_pixels": 3136,
                                       "max_pixels": 200704}
        assert len(row["images"]) == min(index, 1) + 1  # the current screenshot and one earlier
    step = steps[edit_index]
    answer = sft[edit_index]["messages"][-1]["content"]
    assert "start_box=" in answer and "click(x=" not in answer, answer  # UI-TARS' grammar, not Loupe's
    assert parse(answer, format="uitars", width=step.width, height=step.height, min_pixels=3136,
                 max_pixels=200704).action.to_dict() == step.action
    [pair] = [row for row in frozen["dpo"] if row["meta"]["step_index"] == edit_index]
    assert pair["chosen"][0]["content"] == answer and pair["rejected"][0]["content"] == step.proposal["raw"]
    assert pair["images"] == sft[edit_index]["images"]
    timings["snapshots"] = round(time.monotonic() - started, 1)

    # 4. a cycle trains a LoRA adapter with TRL, measures it and the deployed checkpoint (0 vs 0: rejected), and a
    # manager deploys it anyway: the adapter is loaded into the running server under a new name
    cycle = run_cycle(lead, pid, stack)
    timings["cycle 1 (lora)"] = round(time.monotonic() - started, 1)
    assert cycle["state"] == "rejected", (cycle["state"], cycle["error"], cycle["log_tail"][-3000:])
    assert {e["role"] for e in cycle["evaluations"]} == {"candidate", "deployed"}
    assert all(e["episodes"] == 2 for e in cycle["evaluations"])
    approved = lead.call("POST", f"/api/v1/cycles/{cycle['id']}/approve")
    assert approved["state"] == "deployed", approved
    served = f"{project.slug}-c1"
    loads = [body for path, body in Proxy.requests if path.endswith("/load_lora_adapter")]
    candidate = Checkpoint.objects.get(pk=approved["candidate"]["id"])
    assert loads[-1] == {"lora_name": served, "lora_path": f"{candidate.uri}/adapter"}, loads
    trained = TrainingRun.objects.get(pk=cycle["run"]["id"])
    assert trained.init_checkpoint_id == registered["id"] and trained.config["stages"][0]["lora"] == "r=4"
    assert "--action-format uitars" in trained.log  # the record's format: the base dir has no loupe.json
    assert (Path(candidate.uri) / "adapter" / "adapter_config.json").is_file()  # PEFT's, as vLLM loads it
    assert (candidate.action_format, candidate.reads_images) == ("uitars", True)
    assert json.loads((Path(candidate.uri) / "loupe.json").read_text())["action_format"] == "uitars"

    # 5. the next episode runs on the new checkpoint, asking the server for its name
    next_episode_asks_for(lead, pid, train, 4, stack, "c1", served)
    timings["episode on c1"] = round(time.monotonic() - started, 1)

    # full fine-tuning, SFT then DPO from the deployed c1's weights, loaded into the server whole
    lead.call("PATCH", f"/api/v1/projects/{pid}/cycle-settings", {
        "export": "full", "min_new_rows": 0,
        "recipe": [{"algorithm": "sft", "max_steps": 2, "lr": 0.001}, {"algorithm": "dpo", "max_steps": 1}]})
    cycle = run_cycle(lead, pid, stack)
    timings["cycle 2 (full)"] = round(time.monotonic() - started, 1)
    assert cycle["state"] == "rejected", (cycle["state"], cycle["error"], cycle["log_tail"][-3000:])
    approved = lead.call("POST", f"/api/v1/cycles/{cycle['id']}/approve")
    assert approved["state"] == "deployed", approved
    loads = [body for path, body in Proxy.requests if path.endswith("/load_lora_adapter")]
    candidate = Checkpoint.objects.get(pk=approved["candidate"]["id"])
    assert loads[-1] == {"lora_name": f"{project.slug}-c2", "lora_path": candidate.uri}, loads
    trained = TrainingRun.objects.get(pk=cycle["run"]["id"])
    assert trained.init_checkpoint.name == "c1" and [s["algorithm"] for s in trained.config["stages"]] == ["sft", "dpo"]
    assert not any("lora" in s for s in trained.config["stages"]) and not (Path(candidate.uri) / "adapter").exists()
    next_episode_asks_for(lead, pid, train, 5, stack, "c2", f"{project.slug}-c2")
    timings["episode on c2"] = round(time.monotonic() - started, 1)
    print("VLM-FLYWHEEL", json.dumps(timings))
    worker_quiet(timeout=120)
