"""Simulated annotators: scripted people who use Loupe only through its REST and WebSocket API, as the
browser does (never the database), for the flywheel demonstration (tests/cycles/test_cycles_demo.py,
``python manage.py flywheel_demo``).

Each one logs in for a token, starts a supervised episode, and watches the live socket. Like a person
who reads the screen, it keeps its own copy of the page: the same task and seed in its own env (a MiniWoB
page, or the shop or wiki in its own browser; an authored task's JSON learnt first), replaying every executed step. At each proposal it asks the task's scripted solver what a
competent person would do, then:
- approves the model's step when it does the same thing (a click inside the same element, the same text) and its
  thought says so: a thought that quotes the line of an element its action does not click ('[button] "Submit" x=50,
  y=108' before a click into the text field) is edited, as a person who reads the thought would (approved, it would
  teach the checkpoint to write one thing and do another: cycle 1 of a flywheel run trained on three such enter-text
  approvals, and its candidate then repeated "I click into the text field" until the step limit),
- edits it to the solver's step when it is wrong, keeping the model's way of writing its thought: when the model
  quotes the line of the element it clicks (as the cold-start v0 learnt to), the person quotes the right one,

- takes over and acts itself when the model is lost (an unparsable, void turn), then hands back; what it writes then
  keeps the checkpoint's convention too (learnt from its earlier proposals), or its rows would teach another one.
"""
from __future__ import annotations

import json
import logging
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


class ApiFailure(RuntimeError):
    pass


@dataclass
class SessionReport:
    episode_id: int
    task: str
    seed: int
    approved: int = 0
    edited: int = 0
    took_over: int = 0
    thoughts_fixed: int = 0  # of the edits: a right action whose thought quoted another element's line
    reward: float | None = None
    checkpoint: str | None = None
    seconds: float = 0.0
    events: list[str] = field(default_factory=list)


class Api:
    """The REST API with a bearer token (what a script, or the browser with its cookie, uses)."""

    def __init__(self, base: str, username: str, password: str):
        self.base = base.rstrip("/")
        self.token = self.call("POST", "/api/v1/auth/token", {"username": username, "password": password},
                               auth=False)["token"]

    def call(self, method: str, path: str, body: dict | None = None, *, auth: bool = True, ok=(200, 201, 202)):
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if auth:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(self.base + path, method=method, headers=headers,
                                         data=json.dumps(body).encode() if body is not None else None)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                text = response.read().decode()
                status = response.status
        except urllib.error.HTTPError as exc:
            text, status = exc.read().decode(errors="replace"), exc.code
        except urllib.error.URLError as exc:  # nothing answers there: say where, not a traceback
            raise ApiFailure(f"cannot reach Loupe at {self.base} ({exc.reason}); is it running (make run), and is "
                             "--url its address?") from None
        data = json.loads(text) if text else None
        if status not in ok:
            raise ApiFailure(f"{method} {path} -> {status}: {data}")
        return data


class Socket:
    """The live-session WebSocket of one episode."""

    def __init__(self, base: str, token: str, episode_id: int):
        import websocket

        url = base.replace("http", "ws", 1) + f"/ws/episodes/{episode_id}/?after=0"
        self.ws = websocket.create_connection(url, header=[f"Authorization: Bearer {token}"], timeout=300,
                                              suppress_origin=True)
        self.counter = 0

    def send(self, type: str, **fields) -> str:  # noqa: A002 - the protocol's field name
        self.counter += 1
        command_id = f"sim-{self.counter}-{time.monotonic_ns()}"
        self.ws.send(json.dumps({"type": type, "id": command_id, **fields}))
        return command_id

    def receive(self, timeout: float) -> dict:
        self.ws.settimeout(timeout)
        return json.loads(self.ws.recv())

    def close(self) -> None:
        self.ws.close()


def same_step(proposal: dict, solver_action, observation) -> bool:
    """Whether the model's proposed action does what the solver's does: a click inside the element the solver
    clicks, or the same action otherwise."""
    action = proposal.get("action")
    if not action or action.get("name") != solver_action.name:
        return False
    if solver_action.name in ("click", "double_click", "right_click"):
        x, y = action["args"].get("x"), action["args"].get("y")
        sx, sy = solver_action.args["x"], solver_action.args["y"]
        targets = [e for e in observation.elements
                   if abs(sx - e.x) * 2 <= max(e.width, 1) and abs(sy - e.y) * 2 <= max(e.height, 1)]
        if not isinstance(x, int) or not isinstance(y, int):
            return False
        if targets:
            target = min(targets, key=lambda e: e.width * e.height)  # the innermost element under the point
            return abs(x - target.x) * 2 < target.width and abs(y - target.y) * 2 < target.height
        return abs(x - sx) <= 3 and abs(y - sy) <= 3
    return action.get("args") == solver_action.args


QUOTED_LINE = re.compile(r'\[[\w-]+\] ".*?" x=(-?\d+), y=(-?\d+)')  # an element's line, as a prompt shows it


def thought_fits(thought: str, action: dict | None) -> bool:
    """Whether a proposal's thought agrees with its action: a thought that quotes element lines (the checkpoint's
    convention: its click copies the numbers it has just written) quotes last the point it clicks. A thought that
    quotes nothing, or an action without a point, is not judged here."""
    points = QUOTED_LINE.findall(thought or "")
    args = (action or {}).get("args") or {}
    if not points or not {"x", "y"} <= set(args):
        return True
    return (int(points[-1][0]), int(points[-1][1])) == (args["x"], args["y"])


def corrected_thought(proposed: str, solver_turn, observation, style: str, quotes: bool = False) -> str:
    """The thought a person writes over a wrong proposal: the solver's, and, when the model's own thought quoted an
    element's line (the convention of the checkpoint: its action copies the numbers it has just written) or
    ``quotes`` says its thoughts do (a void proposal, taken over, shows none), the line of the element the right click
    lands on. A correction in another convention would teach the checkpoint to drop the habit its answers rest on."""
    from agent.prompt import render_element

    action = solver_turn.action
    quoted = quotes or QUOTED_LINE.search(proposed or "")
    if not quoted or action is None or not {"x", "y"} <= set(action.args):
        return solver_turn.thought
    at = [e for e in observation.elements if (e.x, e.y) == (action.args["x"], action.args["y"])]
    if len(at) != 1:
        return solver_turn.thought
    return f"{solver_turn.thought.strip()} {render_element(at[0], style)}"


class SimulatedAnnotator:
    """One person at a browser: its API token and its own view of the page."""

    def __init__(self, base: str, username: str, password: str, *, env=None, think: float = 0.0,
                 style: str = "named"):
        self.base, self.username = base.rstrip("/"), username
        self.style = style  # the prompt style of the element lines a corrected thought quotes (the tiny model's)
        self.api = Api(base, username, password)
        self.envs = {"miniwob": env} if env is not None else {}  # its own page of each env kind, made when needed
        self.authored: dict[tuple[str, str], dict] = {}  # (kind, task) -> the JSON its env learnt
        self.think = think  # seconds a person looks before answering
        # whether the checkpoint's thoughts quote the line of the element they click, as learnt from its proposals:
        # what a person acting for it after a takeover writes too
        self.quotes = False

    def close(self) -> None:
        for env in self.envs.values():
            env.close()
        self.envs.clear()

    def env_for(self, env_kind: str, task_name: str, definition: dict | None):
        """Its own env of the task's kind (MiniWoB's page, the shop or wiki in its own browser), knowing an authored
        task's JSON as the rollout worker's env does."""
        from agent.envs import add_authored_task, make_env

        if env_kind not in self.envs:
            self.envs[env_kind] = make_env(env_kind)
        env = self.envs[env_kind]
        if definition is not None and self.authored.get((env_kind, task_name)) != definition:
            add_authored_task(env, definition)
            self.authored[(env_kind, task_name)] = definition
        return env

    def supervise(self, project_id: int, task_id: int, task_name: str, seed: int, timeout: float = 300, *,
                  env_kind: str = "miniwob", definition: dict | None = None) -> SessionReport:
        """Start a supervised episode on (task, seed) and steer it to its end."""
        from agent.actions import Action, Turn
        from agent.solvers import SolverError, solve_step

        started = time.monotonic()
        env = self.env_for(env_kind, task_name, definition)
        episode = self.api.call("POST", f"/api/v1/projects/{project_id}/episodes/",
                                {"task": task_id, "seeds": [seed], "mode": "supervised"})["results"][0]
        report = SessionReport(episode_id=episode["id"], task=task_name, seed=seed)
        observation = env.reset(task_name, seed)
        history = []  # the turns executed so far (the solver reads its own history)
        answered: set[tuple] = set()
        socket = Socket(self.base, self.api.token, episode["id"])
        try:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                message = socket.receive(max(1.0, deadline - time.monotonic()))
                kind, data = message.get("type"), message.get("data") or {}
                if kind == "error" and data.get("message"):
                    report.events.append(f"error: {data['message']}")
                if kind == "episode.finished":
                    report.reward = data.get("reward")
                    break
                if kind == "step.executed":
                    action = Action.from_dict(data["action"]) if data.get("action") else None
                    if action is not None:
                        observation = env.step(action).observation
                        history.append(Turn(thought=data.get("thought", ""), action=action, void_reason=None,
                                            raw=data.get("action_text", "")))
                    if data.get("actor") == "human":
                        socket.send("handback")  # the model may try the next step again
                    continue
                if kind != "step.proposed":
                    continue
                key = (data["index"], data.get("reason", ""))
                if key in answered:
                    continue
                answered.add(key)
                if self.think:
                    time.sleep(self.think)
                try:
                    turn = solve_step(task_name, observation, history)
                except SolverError as exc:
                    report.events.append(f"solver: {exc}")
                    socket.send("finish", outcome="infeasible", comment=f"I could not see how: {exc}")
                    continue
                action_text = turn.action.to_text()
                self.quotes = self.quotes or bool(QUOTED_LINE.search(data.get("thought") or ""))
                if data.get("reason") == "takeover":  # the page under our control: act as the solver would
                    socket.send("act", action=action_text,
                                thought=corrected_thought("", turn, observation, self.style, self.quotes))
                    continue
                if data.get("action") is None:  # the model is lost: take over, act, and hand back after
                    report.took_over += 1
                    socket.send("takeover")
                    continue
                right = same_step(data, turn.action, observation)
                if right and thought_fits(data.get("thought", ""), data["action"]):
                    report.approved += 1
                    socket.send("approve", index=data["index"])
                else:
                    report.edited += 1
                    report.thoughts_fixed += right
                    thought = corrected_thought(data.get("thought", ""), turn, observation, self.style, self.quotes)
                    socket.send("edit", index=data["index"], thought=thought, action=action_text)
            else:
                raise ApiFailure(f"episode {episode['id']} did not finish within {timeout:.0f} s: {report.events[-5:]}")
        finally:
            socket.close()
        detail = self.api.call("GET", f"/api/v1/episodes/{episode['id']}/")
        report.checkpoint = (detail.get("checkpoint") or {}).get("name")
        report.reward = detail.get("reward")
        report.seconds = round(time.monotonic() - started, 2)
        return report


def annotate(base: str, usernames: list[str], password: str, project_id: int, task: dict, seeds: list[int]) -> list:
    """Each annotator (a thread with its own browser) supervises its share of the seeds; their reports."""
    import threading

    reports, errors = [], []

    def work(username: str, mine: list[int]):
        person = SimulatedAnnotator(base, username, password)
        try:
            for seed in mine:
                reports.append(person.supervise(project_id, task["id"], task["task_name"], seed,
                                                env_kind=task.get("env_kind", "miniwob"),
                                                definition=task.get("definition")))
        except Exception as exc:  # noqa: BLE001 - reported to the caller with whose work it was
            errors.append(f"{username}: {exc!r}")
        finally:
            person.close()

    threads = [threading.Thread(target=work, args=(name, seeds[i::len(usernames)])) for i, name in enumerate(usernames)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise ApiFailure("; ".join(errors))
    return reports


NEW_TASK_WEIGHT = 3  # a task the deployed checkpoint was not trained on gets three times the episodes of one it was


def episode_shares(total: int, tasks: list[str] | tuple[str, ...], known: set[str] | tuple[str, ...]) -> dict[str, int]:
    """Episodes a cycle for each task, as a manager would hand them out: ``total`` split by weight (1 for a task the
    checkpoint was trained on, the ``known`` ones, where people mostly approve; NEW_TASK_WEIGHT for the others, where
    their corrections teach), at least one each, the remainder to the new tasks first."""
    if total < len(tasks):
        raise ValueError(f"{total} episodes are fewer than the {len(tasks)} tasks to annotate: give each at least one")
    weights = {t: 1 if t in known else NEW_TASK_WEIGHT for t in tasks}
    unit = total / sum(weights.values())
    out = {t: max(1, int(unit * w)) for t, w in weights.items()}
    for t in sorted(tasks, key=lambda t: t in known):  # new tasks first, in their order
        if sum(out.values()) >= total:
            break
        out[t] += 1
    while sum(out.values()) > total:  # the floors of one a task overshot: take from the largest shares
        out[max(out, key=out.get)] -= 1
    return out


TRAIN_SEEDS = (10_000, 99_999)  # the seeds of the flywheel demonstration's train tasks (held-out ones are below)


def train_seeds(run: int, cycle: int, count: int) -> list[int]:
    """The ``count`` train seeds cycle ``cycle`` (0 on) of demonstration run ``run`` (LOUPE_DEMO_SEED) annotates: a
    run's own 2,500 of the range (34 runs of up to three cycles share none), a cycle's from 1,000 past the last's,
    every one within TRAIN_SEEDS; runs 0-4 start where they always did (10000, 30000, ... 90000)."""
    low, high = TRAIN_SEEDS
    start = 5_000 * ((4 * run) % 17) + 2_500 * ((run // 17) % 2) + 1_000 * cycle
    return [low + (start + k) % (high - low + 1) for k in range(count)]


def in_turn(items, cycle: int, count: int) -> list:
    """``count`` of ``items`` for cycle ``cycle`` (0 on), going round them from where the last cycle stopped: tasks
    that show the same steps on different things (the shop's products) are annotated each in turn."""
    return [items[(cycle * count + i) % len(items)] for i in range(count)]


def cycle_run(manager: Api, project_id: int, timeout: float = 1800, on_progress=None, every: float = 60) -> dict:
    """Run a cycle now, as the Cycles page's button does, and follow it to its end; ``on_progress(cycle)`` every
    ``every`` seconds while it runs."""
    cycle = manager.call("POST", f"/api/v1/projects/{project_id}/cycles/")
    started = time.monotonic()
    deadline, shown = started + timeout, started + every
    while time.monotonic() < deadline:
        cycle = manager.call("GET", f"/api/v1/cycles/{cycle['id']}/")
        if cycle["state"] in ("deployed", "rejected", "skipped", "failed"):
            return cycle
        if on_progress and time.monotonic() >= shown:
            on_progress(cycle)
            shown = time.monotonic() + every
        time.sleep(2)
    raise ApiFailure(f"cycle {cycle['iteration']} is still {cycle['state']} after {timeout:.0f} s; it goes on (the "
                     "project's Cycles page follows it)")


def group_success(evaluation: dict, groups: dict[str, tuple | list]) -> dict:
    """An evaluation's success rate over all its episodes (``all``) and over each group of tasks (e.g. the old tasks,
    which the deployed checkpoint was trained on, and the new ones), episode-weighted; a group none of whose tasks was
    evaluated is None."""
    per_task = evaluation.get("per_task") or {}
    out = {"all": evaluation.get("success_rate")}
    for name, tasks in groups.items():
        measured = [per_task[t] for t in tasks if t in per_task]
        episodes = sum(t["episodes"] for t in measured)
        out[name] = sum(t["success_rate"] * t["episodes"] for t in measured) / episodes if episodes else None
    return out


def cycle_figures(cycle: dict, reports: list, annotate_seconds: float, groups: dict | None = None) -> dict:
    """What a cycle did, in numbers: success before and after (overall and, with ``groups``, per group of tasks, e.g.
    ``{"old": [...], "new": [...]}``), per task, seconds by state, the data, the annotation."""
    rates = {e["role"]: e for e in cycle["evaluations"]}
    candidate, deployed = rates.get("candidate") or {}, rates.get("deployed") or {}
    return {
        "iteration": cycle["iteration"], "state": cycle["state"], "decision": cycle["decision"],
        "success_before": deployed.get("success_rate"), "success_after": candidate.get("success_rate"),
        "before": group_success(deployed, groups or {}), "after": group_success(candidate, groups or {}),
        "per_task_before": {t: v["success_rate"] for t, v in (deployed.get("per_task") or {}).items()},
        "per_task_after": {t: v["success_rate"] for t, v in (candidate.get("per_task") or {}).items()},
        "eval_episodes": candidate.get("episodes"),
        "seconds_by_state": {state: t.get("seconds") for state, t in cycle["timings"].items()},
        "cycle_seconds": round(sum(t.get("seconds") or 0 for t in cycle["timings"].values()), 1),
        "rows": {s["kind"]: s["rows"] for s in cycle["snapshots"] if s["status"] == "ready"},
        "annotation": {"episodes": len(reports), "approved": sum(r.approved for r in reports),
                       "edited": sum(r.edited for r in reports), "took_over": sum(r.took_over for r in reports),
                       "thoughts_fixed": sum(r.thoughts_fixed for r in reports),
                       "successes": sum(1 for r in reports if (r.reward or 0) > 0.5),
                       "seconds": round(annotate_seconds, 1)},
    }
