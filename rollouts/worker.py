"""The rollout worker's side of an episode: one browser (or desktop) per worker process, policies cached by
checkpoint, every step stored (PostgreSQL, then the channel layer) as it executes.

A checkpoint says how it is prompted and read (``Checkpoint.action_format``, ``reads_images``) and the
project how many earlier screenshots a screen-reading checkpoint gets (cycle setting ``history_images``):
:func:`prompting_for` turns them into run_episode's arguments."""
from __future__ import annotations

import functools
import logging
import time

from django.conf import settings

from agent import formats
from agent.actions import Action
from agent.envs import EnvError, add_authored_task, make_env
from agent.policies import PolicyError, make_policy
from agent.rollout import Supervisor, human_turn, run_episode
from agent.screen_match import screen_difference
from core.errors import ApplicationError
from projects.taskspec_files import files_for_task
from rollouts import episodes, privacy, steps
from rollouts.episodes import EpisodeStop
from rollouts.heartbeats import Heartbeat, worker_name
from rollouts.history import history_images_of
from rollouts.models import Deployment, Episode, EpisodeStatus, Step

log = logging.getLogger(__name__)

_envs: dict = {}
_policies: dict = {}
# Answer length asked of an openai policy: Loupe's grammar is one short line of thought and an action; the formats
# of real GUI agents come with a plan (UI-TARS) or a code block (OpenCUA), which 96 tokens would cut into void turns.
MAX_TOKENS = {"loupe": 96}
MAX_TOKENS_OTHER_FORMATS = 384


def env_for(kind: str):
    """One environment (one browser process) per worker process and env kind, reused across episodes."""
    env = _envs.get(kind)
    if env is None:
        options = {"pool": settings.LOUPE_DESKTOP_POOL} if kind == "desktop" else {}
        env = _envs[kind] = make_env(kind, **options)
    return env


def close_envs(**_signal) -> None:
    """Close this process's environments (a desktop's X server, its warm pool) when the worker process ends."""
    while _envs:
        kind, env = _envs.popitem()
        try:
            env.close()
        except Exception:  # noqa: BLE001 - shutting down: close the others all the same
            log.exception("closing the %s environment failed", kind)


def _connect_shutdown() -> None:
    from celery.signals import worker_process_shutdown

    worker_process_shutdown.connect(close_envs, weak=False)


_connect_shutdown()


def _backend(episode: Episode) -> tuple[Deployment | None, str]:
    deployment = (Deployment.objects.filter(project_id=episode.project_id, checkpoint_id=episode.checkpoint_id)
                  .order_by("-activated_at").first())
    return deployment, deployment.backend if deployment else settings.LOUPE_POLICY_BACKEND


def prompting_for(episode: Episode) -> dict:
    """How the episode's policy is prompted and read, as run_episode's keyword arguments: the checkpoint's action
    format, its screenshot if it reads them, and then the project's ``history_images`` earlier ones, and its image
    processor's pixel limits (the grid UI-TARS points on). The scripted baseline reads Loupe's text prompt and answers
    in Loupe's grammar, whatever the checkpoint."""
    checkpoint = episode.checkpoint
    _, backend = _backend(episode)
    if checkpoint is None or backend == "scripted":
        return {"action_format": "loupe", "with_image": False, "history_images": 0, "pixels": {}}
    reads = checkpoint.reads_images
    history = history_images_of(episode.project) if reads else 0
    return {"action_format": checkpoint.action_format, "with_image": reads, "history_images": history,
            "pixels": formats.pixel_limits(checkpoint.uri)}


def policy_for(episode: Episode):
    """The policy that acts for this episode: its checkpoint, served as its deployment says."""
    deployment, backend = _backend(episode)
    checkpoint = episode.checkpoint
    if backend == "openai":
        name = (deployment.served_name if deployment else "") or checkpoint.name
        answer_format = checkpoint.action_format if checkpoint else "loupe"
        max_tokens = MAX_TOKENS.get(answer_format, MAX_TOKENS_OTHER_FORMATS)
        key = ("openai", name, max_tokens)
        if key not in _policies:
            _policies[key] = make_policy("openai", base_url=settings.LOUPE_OPENAI_BASE_URL, model=name,
                                         api_key=settings.LOUPE_OPENAI_API_KEY or None,
                                         timeout=settings.LOUPE_OPENAI_TIMEOUT_SECONDS,
                                         retries=settings.LOUPE_OPENAI_RETRIES, max_tokens=max_tokens)
        return _policies[key]
    if backend == "scripted":
        refusal = episodes.scripted_refusal(episode.task, backend)
        if refusal:  # queued before the scripted baseline was deployed again (a rollback)
            raise PolicyError(refusal)
        return make_policy("scripted", task=episode.task.task_name)
    if checkpoint is not None and checkpoint.reads_images:
        raise PolicyError(f"Checkpoint {checkpoint.name} reads screenshots; the local backend runs text models only. "
                          "Deploy it on the openai backend (vLLM, or python -m trainer serve on a CPU).")
    if settings.LOUPE_POLICY_SERVER_URL:  # the host's one batching server (make run starts it) answers every worker
        key = ("served", checkpoint.uri)
        if key not in _policies:
            _policies[key] = make_policy("served", base_url=settings.LOUPE_POLICY_SERVER_URL,
                                         checkpoint_dir=checkpoint.uri, timeout=settings.LOUPE_OPENAI_TIMEOUT_SECONDS * 4,
                                         max_tokens=MAX_TOKENS.get(checkpoint.action_format, MAX_TOKENS_OTHER_FORMATS))
        return _policies[key]
    key = ("local", checkpoint.uri)
    if key not in _policies:
        # one local model per process at a time: reload in place when the deployment changes
        current = next((p for k, p in _policies.items() if k[0] == "local"), None)
        if current is not None:
            current.reload(checkpoint.uri)
            _policies.clear()
            _policies[key] = current
        else:
            _policies[key] = make_policy("local", checkpoint_dir=checkpoint.uri,
                                         num_threads=settings.LOUPE_POLICY_THREADS or None)
    return _policies[key]


def record_step(episode: Episode, record, *, intervened_by=None, linked=None) -> Step:
    """Store one agent.rollout.StepRecord."""
    obs = record.observation
    out = record.output
    turn = record.turn
    return steps.step_record(
        episode=episode, index=record.index, screenshot=obs.screenshot, width=obs.width,
        height=obs.height, url=obs.url, instruction=obs.instruction, elements=[e.to_dict() for e in obs.elements], screen_text=obs.screen_text or "",
        feedback=record.feedback,
        prompt=record.prompt or [], raw_output=out.text if out else turn.raw, token_ids=list(out.token_ids) if out else [],
        token_logprobs=[float(x) for x in out.token_logprobs] if out else [], thought=turn.thought,
        action=turn.action.to_dict() if turn.action else None, action_text=turn.action.to_text() if turn.action else "",
        actor=record.actor, proposal=steps.turn_payload(record.proposal), reward=float(record.reward), done=bool(record.done),
        void_reason=turn.void_reason, info=record.info, timings=record.timings,
        intervened_by=intervened_by, action_format=record.action_format, linked=linked,
        **_confidence_fields(record.confidence),
    )


def record_rejection(episode: Episode, record, *, rejected_by=None):
    """Store one agent.rollout.RejectedProposal."""
    turn, out = record.turn, record.output
    return steps.rejection_record(
        episode=episode, index=record.index, attempt=record.attempt, prompt=record.prompt,
        raw_output=out.text, token_ids=list(out.token_ids), token_logprobs=[float(x) for x in out.token_logprobs],
        thought=turn.thought, action=turn.action.to_dict() if turn.action else None,
        action_text=turn.action.to_text() if turn.action else "", void_reason=turn.void_reason, reason=record.reason,
        repeated=record.repeated, rejected_by=rejected_by, action_format=record.action_format,
        **_confidence_fields(record.confidence))


def _confidence_fields(confidence) -> dict:
    """A proposal's agent.confidence.Confidence as the Step / Rejection columns that keep it."""
    if confidence is None:
        return {}
    return {"confidence": round(confidence.score, 6),
            "confidence_margin": None if confidence.margin is None else round(confidence.margin, 6)}


class LiveSupervisor(Supervisor):
    """The supervisor the worker plugs into an episode (settings.LOUPE_SUPERVISOR_FACTORY): the loop's hooks
    (agent.rollout.Supervisor) and the worker's, each with its null default; an episode with no factory runs
    with this one (every proposal approved, nobody to answer)."""

    def actor_for(self, index: int):
        """The person who decided step ``index`` (None: the model did)."""
        return None

    def step_stored(self, step: Step) -> None:
        """Inside the transaction that stores ``step``: link to it what was recorded for its index while it was
        decided (a person's interventions)."""

    def after_step(self, step: Step) -> None:
        """Step ``step`` is stored."""

    def close(self) -> None:
        """The episode's run is over."""


class BranchReplay:
    """A branch's replay of its parent (Episode.parent, branched_at = k): the parent's steps 0..k-1 are replayed on
    the same seed, and before each replayed action, and once more at step k, the screen is checked against the
    parent's stored step (agent.screen_match: elements, then screenshot). Each replayed step is stored on the
    branch at its parent's index as a copy of the parent's (steps.step_copy, info ``replayed_from``), void
    steps too (with the parent's screenshot), so the branch's step k is the parent's step k on the same state.
    On a resumed branch the branch's own steps after k are replayed unchecked, as any resume's are."""

    def __init__(self, episode: Episode):
        self.episode = episode
        self.k = episode.branched_at
        self.parent_steps = list(Step.objects.filter(episode_id=episode.parent_id, index__lt=self.k).order_by("index"))
        for step, action in zip(self.parent_steps, privacy.replay_actions(project=episode.project,
                                                                          steps=self.parent_steps)):
            step.action = action  # what was typed where its stored copy is redacted (rollouts/privacy.py)
        self.acted = [s for s in self.parent_steps if s.action]  # the steps a replay executes, in order
        self.at_k = Step.objects.filter(episode_id=episode.parent_id, index=self.k).first()
        self.copied = 0  # parent steps stored on the branch so far

    @staticmethod
    def turn_of(step: Step):
        """A stored step's turn as the policy's history shows it (its thought and action)."""
        return human_turn(Action.from_dict(step.action), step.thought)

    def _expected(self, position: int) -> Step | None:
        if position < len(self.acted):
            return self.acted[position]
        return self.at_k if position == len(self.acted) else None

    def check(self, position: int, observation) -> str | None:
        """What differs between the screen before replayed action ``position`` (or at step k) and the parent's."""
        expected = self._expected(position)
        if expected is None:
            return None
        screenshot = _stored_bytes(expected.screenshot)
        # the parent's step is stored redacted: compared with this screen as it would be stored
        as_stored = privacy.observation_as_stored(settings=self.episode.project.settings, observation=observation)
        difference = screen_difference(expected_elements=expected.elements or [], expected_screenshot=screenshot,
                                       observation=as_stored)
        if difference:
            return (f"the replay of episode {self.episode.parent_id} diverged at step {expected.index + 1}: "
                    f"{difference}; nothing of episode {self.episode.parent_id} was changed")
        if position == len(self.acted):
            self._copy_up_to(self.k - 1, observation)  # void steps just before k
        return None

    def store(self, record) -> None:
        """Store a replayed step and the parent's void steps before it."""
        if record.index < len(self.acted):
            self._copy_up_to(self.acted[record.index].index, record.observation)

    def _copy_up_to(self, last: int, observation) -> None:
        for source in self.parent_steps[self.copied:last + 1]:
            if source.action:
                shot, width, height, url = observation.screenshot, observation.width, observation.height, observation.url
            else:
                shot, width, height, url = _stored_bytes(source.screenshot) or b"", source.width, source.height, source.url
            steps.step_copy(branch=self.episode, source=source, screenshot=shot, width=width, height=height, url=url)
            self.copied += 1


def _stored_bytes(name: str) -> bytes | None:
    if not name:
        return None
    from django.core.files.storage import default_storage

    with default_storage.open(name, "rb") as handle:
        return handle.read()


def run(episode_id: int, *, supervisor_factory=None) -> str:
    """Run (or resume) one episode to its end. Returns the end reason."""
    worker = worker_name()
    episode = episodes.episode_claim(episode_id=episode_id, worker=worker)
    if episode is None:
        return "nothing to run"
    log.info("episode %s claimed by %s (task %s, seed %s, %s)", episode.pk, worker, episode.task.task_name,
             episode.seed, episode.mode)
    try:  # a step whose typed text was redacted replays its kept original, or the episode cannot be replayed
        branch = BranchReplay(episode) if episode.parent_id else None
        own = episode.steps.filter(index__gte=episode.branched_at) if branch is not None else episode.steps
        stored = [s.action for s in branch.parent_steps] if branch is not None else []
        stored += privacy.replay_actions(project=episode.project,
                                         steps=own.order_by("index").only("episode_id", "index", "action"))
    except ApplicationError as exc:
        episodes.episode_finish(episode_id=episode.pk, status=EpisodeStatus.FAILED,
                                end_reason=f"cannot replay: {exc.message}")
        return "replay_refused"
    replay = [Action.from_dict(a) for a in stored if a]  # void turns changed nothing on the page
    if branch is not None:  # the parent's turns with their thoughts, so the prompt at k is the parent's prompt at k
        replay[:len(branch.acted)] = [branch.turn_of(s) for s in branch.acted]
    started = time.monotonic()
    beat = functools.partial(episodes.episode_heartbeat, episode_id=episode.pk, worker=worker)
    with Heartbeat(beat, f"heartbeat-{episode.pk}"):
        supervisor = LiveSupervisor()  # until the factory's is made; closed either way
        try:
            env = env_for(episode.task.env_kind)
            # an authored task: the env learns its JSON (and gets the files it downloads, from the project's store)
            add_authored_task(env, episode.task.definition, files=files_for_task(episode.task))
            policy = policy_for(episode)
            prompting = prompting_for(episode)
            log.info("episode %s: environment and policy ready after %.1f s", episode.pk, time.monotonic() - started)
            if supervisor_factory is not None:
                supervisor = supervisor_factory(episode)

            def on_step(record):  # replayed steps are not passed here: they were stored before the interruption
                supervisor.after_step(record_step(episode, record, intervened_by=supervisor.actor_for(record.index),
                                                  linked=supervisor.step_stored))

            def on_reject(record):
                record_rejection(episode, record, rejected_by=supervisor.actor_for(record.index))

            # every episode gets the supervisor: watchers may pause or take over autonomous ones too, and its live
            # view streams the screen while a person decides or acts. New steps continue after every stored one,
            # void ones (which a replay skips) included.
            result = run_episode(env, policy, task=episode.task.task_name, seed=episode.seed,
                                 max_steps=episode.task.max_steps, supervisor=supervisor, start_index=len(stored),
                                 on_step=on_step, on_reject=on_reject, replay=replay or None, **prompting,
                                 replay_check=branch.check if branch else None,
                                 on_replayed=branch.store if branch else None)
        except EpisodeStop as exc:
            episodes.episode_finish(episode_id=episode.pk, status=exc.status, end_reason=str(exc))
            return "stopped"
        except EnvError as exc:
            episodes.episode_finish(episode_id=episode.pk, status=EpisodeStatus.FAILED,
                                    end_reason=f"environment failed: {exc}")
            return "env_error"
        except PolicyError as exc:  # the policy cannot be built for this episode: its reason, said plainly
            episodes.episode_finish(episode_id=episode.pk, status=EpisodeStatus.FAILED,
                                    end_reason=f"policy_error: {exc}")
            return "policy_error"
        except Exception as exc:
            log.exception("episode %s crashed", episode.pk)
            episodes.episode_finish(episode_id=episode.pk, status=EpisodeStatus.FAILED,
                                    end_reason=f"{type(exc).__name__}: {exc}")
            raise
        finally:
            supervisor.close()
    reason = result.end_reason
    outcome = result.outcome if result.outcome in ("success", "failure", "infeasible") else ""
    detail = result.error or (result.outcome if result.outcome and not outcome else "")
    if not result.check_ran and not detail:  # void turns: its reward is none, not 0.0, and the reason says why
        detail = "the task's check did not run"
    status = EpisodeStatus.FAILED if reason in ("env_error", "policy_error", "replay_diverged") else EpisodeStatus.FINISHED
    episodes.episode_finish(episode_id=episode.pk, status=status, end_reason=f"{reason}: {detail}" if detail else reason,
                            reward=finish_reward(result), outcome=outcome, check_error=result.check_error or (
                                "" if result.check_ran else f"The task's check did not run: the episode ended first "
                                                            f"({reason.replace('_', ' ')})."))
    log.info("episode %s ended (%s) in %.1f s", episode.pk, reason, time.monotonic() - started)
    return reason


def finish_reward(result) -> float | None:
    """The episode's env reward to store: none where the task's check is the judge's or a person's (the env says
    so with ``info["verdict"]`` on its last step, e.g. an any-URL webapp task): a 0 stored there would count as a
    failure before anyone looked; routing by the judge or a review decides instead."""
    if result.unscored or not result.check_ran:  # no score: a judge or a person decides, the check failed, or it
        return None  # never ran (the episode ended in void turns or an error first)
    last = result.steps[-1].info if result.steps else {}
    if (last or {}).get("verdict") in ("judge", "person"):
        return None
    return float(result.reward)
