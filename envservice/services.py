"""Leases of pooled envs, and the Episode each one plays: the service's business logic.

A lease is one caller's hold on one env of this host for one task of a project. Every reset starts an Episode
(mode autonomous, no checkpoint: the RL job acts), every step is stored through flywheel's ``step_record`` before
its answer goes back, and the episode ends when the env says done, when the caller resets or releases, when the
env crashes (a fresh env replaces it and a new episode starts) or when the caller stops calling (the lease expires).
Leases live in this process, beside their envs; the episodes are in PostgreSQL for everyone.

People steer a lease's episode from the live session page as any live episode: each step asks the supervisor the
rollout worker uses (settings.LOUPE_SUPERVISOR_FACTORY) before it runs. Unpaused and untaken, it approves at once;
paused, the step waits; taken over, the person's actions run (stored as theirs, the caller's action as the overridden
proposal) until they hand back or finish, and the step answers with the person's steps, so the caller sees them as
the episode's steps. The screen streams to watchers while a person decides, read on the env's own thread."""
from __future__ import annotations

import logging
import secrets
import socket
import threading
import time

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone
from django.utils.module_loading import import_string

from agent.actions import Turn
from agent.rollout import Decision
from agent.envs import Observation
from agent.formats import FORMATS, parse
from core.errors import ApplicationError
from envservice import status as host_status
from envservice.leases import ActorScreen, Lease, lease_check_live
from envservice.pool import EnvCrashed, Pool, PoolFull
from rollouts import steps
from rollouts import episodes
from rollouts.episodes import EpisodeStop
from rollouts.events import event_append
from rollouts.models import Episode, EpisodeStatus, Mode
from projects.models import Role, TaskSpec
from projects.selectors import project_role, role_at_least

log = logging.getLogger(__name__)

MIN_ROLE = Role.MANAGER  # an RL job is a run a manager starts, as training runs are
EXPIRED_KEPT = 10_000  # expired lease ids remembered, to answer 410 rather than 404
QUIET_S = 1.0  # the longest a step goes without a full look at people's commands (a NOTIFY lost meanwhile waits)


class EnvService:
    """This host's pools and leases. One per service process (see :func:`current`)."""

    def __init__(self, *, pools: dict[str, Pool], lease_timeout: float = 120.0, step_timeout: float = 60.0,
                 host: str | None = None, supervised: bool = True) -> None:
        self.pools = pools
        factory = settings.LOUPE_SUPERVISOR_FACTORY if supervised else ""
        self.supervisor_factory = import_string(factory) if factory else None
        self.lease_timeout = lease_timeout
        self.step_timeout = step_timeout
        self.host = host or socket.gethostname()
        self.address = self.host  # host:port once the server is bound (server.start): the status page's name for it
        self.steps_taken = 0  # for steps a minute on the status page
        self._rate: tuple[float, int] | None = None
        self._leases: dict[str, Lease] = {}
        self._expired: dict[str, str] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._reaper = threading.Thread(target=self._reap_loop, name="envservice-reaper", daemon=True)
        self._reaper.start()

    # -- reads -----------------------------------------------------------------------------
    def status(self) -> dict:
        return {"host": self.host, "address": self.address, "lease_timeout_s": self.lease_timeout,
                "leases": len(self._leases), "steps_per_minute": self._steps_per_minute(),
                "pools": [pool.status() for pool in self.pools.values()]}

    def _steps_per_minute(self) -> float | None:
        """Steps a minute since the last time this was asked (the reaper's sweep asks every few seconds)."""
        now, steps = time.monotonic(), self.steps_taken
        last, self._rate = self._rate, (now, steps)
        if last is None or now - last[0] <= 0:
            return None
        return round((steps - last[1]) * 60.0 / (now - last[0]), 1)

    def _lease_of(self, *, lease_id: str, user) -> Lease:
        with self._lock:
            lease = self._leases.get(lease_id)
            if lease is None:
                if lease_id in self._expired:
                    raise ApplicationError(f"This lease ended: {self._expired[lease_id]}. Lease an env again.",
                                           status=410)
                raise ApplicationError("No such lease on this host.", status=404)
        if lease.user.pk != user.pk:
            raise ApplicationError("This lease belongs to another caller.", status=403)
        lease.last_seen = time.monotonic()
        return lease

    # -- leases ----------------------------------------------------------------------------
    def lease_open(self, *, user, project_id: int, task: str | int, seed: int | None,
                   action_format: str = "loupe", run: str = "") -> tuple[Lease, dict]:
        role = project_role(user=user, project=project_id)
        if not role_at_least(role, MIN_ROLE):
            raise ApplicationError(
                f"Your token may not use project {project_id}: it needs the {MIN_ROLE} role there"
                + (f" and you are {role}." if role else " and you are not a member (or there is no such project)."),
                status=403)
        if action_format not in FORMATS:
            raise ApplicationError(f"Unknown action format '{action_format}'; use one of: {', '.join(FORMATS)}.",
                                   errors={"format": ["Invalid choice."]})
        spec = _task_of(project_id=project_id, task=task)
        seed = spec.seed_start if seed is None else seed
        if not spec.seed_start <= seed <= spec.seed_end:
            raise ApplicationError(f"Seed {seed} is outside this task's range {spec.seed_start}-{spec.seed_end}.",
                                   errors={"seed": ["Out of range."]})
        pool = self.pools.get(spec.env_kind)
        if pool is None:
            raise ApplicationError(f"This host serves no {spec.env_kind} envs; it serves: {', '.join(self.pools)}.",
                                   status=409)
        try:
            actor, warm = pool.acquire()
        except PoolFull as exc:
            raise ApplicationError(f"{exc}.", status=503) from exc
        lease = Lease(id=secrets.token_urlsafe(16), user=user, task=spec, seed=seed, actor=actor,
                      action_format=action_format, run=run)
        with self._lock:
            self._leases[lease.id] = lease
        started = time.monotonic()
        try:
            with lease.lock:
                self._start_episode(lease)
        except Exception:
            self._drop(lease, reason="the env could not start", give_back=False)
            raise
        return lease, {"warm": warm, "lease_seconds": time.monotonic() - started}

    def lease_reset(self, *, lease_id: str, user, seed: int | None = None) -> Lease:
        lease = self._lease_of(lease_id=lease_id, user=user)
        if seed is not None and not lease.task.seed_start <= seed <= lease.task.seed_end:
            raise ApplicationError(f"Seed {seed} is outside this task's range {lease.task.seed_start}-"
                                   f"{lease.task.seed_end}.", errors={"seed": ["Out of range."]})
        with lease.lock:
            lease_check_live(lease)
            self._end_episode(lease, status=EpisodeStatus.INTERRUPTED, reason="the caller reset the env")
            if seed is not None:
                lease.seed = seed
            self._start_episode(lease)
        return lease

    def lease_step(self, *, lease_id: str, user, action: str, action_format: str | None = None) -> dict:
        """Step the lease's env by ``action`` (model text in the lease's format, or ``action_format``)."""
        lease = self._lease_of(lease_id=lease_id, user=user)
        fmt = action_format or lease.action_format
        if fmt not in FORMATS:
            raise ApplicationError(f"Unknown action format '{fmt}'; use one of: {', '.join(FORMATS)}.",
                                   errors={"format": ["Invalid choice."]})
        with lease.lock:
            lease_check_live(lease)
            if lease.done:
                raise ApplicationError("This episode has ended; reset the lease to start another.", status=409)
            turn = _read_turn(action, fmt, lease.observation)
            taken: list[dict] = []
            while True:
                decision = self._review(lease, turn)  # at once, unless a person paused or took over
                if decision.kind == "approve" and taken:
                    break  # the person handed back: the caller's action was for a screen that is gone
                if decision.kind == "reject":
                    self._reject(lease, turn, fmt, reason=decision.reason)
                    raise ApplicationError(f"A person rejected this action: {decision.reason or 'no reason given'}. "
                                           "The screen is unchanged; send another.", status=409,
                                           errors={"action": ["rejected"]})
                if decision.kind == "finish":
                    taken.append(self._person_finish(lease, decision.outcome))
                    break
                if decision.kind == "approve":
                    taken.append(self._execute(lease, turn, fmt, actor="model"))
                    break
                taken.append(self._execute(lease, decision.turn, "loupe", proposal=turn,
                                           actor="edited" if decision.kind == "edit" else "human"))
                lease.writer.flush()  # watchers see the person's step before the next proposal
                if lease.done or decision.kind == "edit":
                    break  # an edit decides the caller's step; a takeover goes on until the person hands back
            last = taken[-1]
            return {"reward": last["reward"], "done": last["done"], "info": last["info"], "index": last["index"],
                    "timings": last["timings"], "steps": taken, "taken_over": any(s["actor"] != "model" for s in taken)}

    def _reject(self, lease: Lease, turn: Turn, fmt: str, *, reason: str) -> None:
        """Store the caller's action a person rejected, as the rollout worker stores a rejected proposal (the
        session page shows it, and it pairs with what was done instead)."""
        attempt = lease.rejected[lease.index] = lease.rejected.get(lease.index, 0) + 1
        lease.writer.submit(
            steps.rejection_record, episode=lease.episode, index=lease.index, attempt=attempt, prompt=[],
            raw_output=turn.raw, token_ids=[], token_logprobs=[], thought=turn.thought,
            action=turn.action.to_dict() if turn.action else None,
            action_text=turn.action.to_text() if turn.action else "", void_reason=turn.void_reason, reason=reason,
            repeated=False, rejected_by=lease.supervisor.actor_for(lease.index) if lease.supervisor else None,
            action_format=fmt)
        lease.writer.flush()

    def _review(self, lease: Lease, turn: Turn) -> Decision:
        supervisor = lease.supervisor
        if supervisor is None:
            return Decision("approve")
        # an approved, untaken episode stays so until a person's command: between full looks (one a second, in
        # case a wake-up was lost) a step whose episode heard of none needs no queries
        announced = getattr(supervisor, "commands_announced", None)
        if announced is not None and time.monotonic() < lease.quiet_until and not announced():
            return Decision("approve")
        try:
            decision = supervisor.review(lease.index, lease.observation, turn)
            # approved by nobody: the episode runs untaken (a person's approval of a paused one keeps it paused)
            unattended = decision.kind == "approve" and supervisor.actor_for(lease.index) is None
            lease.quiet_until = time.monotonic() + QUIET_S if unattended else 0.0
            return decision
        except EpisodeStop as exc:  # nobody acted on a paused or taken-over episode for too long
            self._end_episode(lease, status=exc.status, reason=str(exc))
            raise ApplicationError(f"The episode ended: {exc}. Reset the lease to start another.", status=409) from exc

    def _execute(self, lease: Lease, turn: Turn, fmt: str, *, actor: str, proposal: Turn | None = None) -> dict:
        """Run one decided turn on the env and store it as the episode's next step; what the step answers."""
        obs = lease.observation
        started, started_at = time.monotonic(), timezone.now()
        by = lease.supervisor.actor_for(lease.index) if lease.supervisor is not None and actor != "model" else None
        if turn.action is None:  # a void turn: stored as the model wrote it, the env untouched
            self._record(lease, obs, turn, fmt, reward=0.0, done=False, info={}, started=started,
                         started_at=started_at)
            lease.writer.flush()
            raise ApplicationError(f"The action could not be read: {turn.void_reason}. It was stored as a void "
                                   "turn; the screen is unchanged.", status=400, errors={"action": [turn.void_reason]})
        if getattr(lease.supervisor, "live", None) is not None:
            lease.supervisor.live.stop()  # no frames while the step runs
        try:
            result = lease.actor.call(lambda env: env.step(turn.action), timeout=self.step_timeout)
        except EnvCrashed as exc:
            self._replace(lease, reason=str(exc))
            raise ApplicationError(
                f"The env crashed during {turn.action.to_text()}: {exc}. A fresh env replaced it and a new "
                f"episode started (episode {lease.episode_id}, same task and seed); step on from its screen.",
                status=502, errors={"env": ["crashed"]}) from exc
        env_s = time.monotonic() - started
        with self._lock:
            self.steps_taken += 1
        self._record(lease, obs, turn, fmt, reward=result.reward, done=result.done, info=result.info,
                     started=started, started_at=started_at, actor=actor, proposal=proposal, intervened_by=by)
        record_s = time.monotonic() - started - env_s
        lease.observation = result.observation
        if result.done:
            self._finish(lease, reward=float(result.reward))
        return {"index": lease.index - 1, "actor": actor, "action_text": turn.action.to_text(),
                "thought": turn.thought, "reward": result.reward, "done": result.done,
                "info": steps.json_safe(result.info),
                "timings": {"env_s": round(env_s, 4), "record_s": round(record_s, 4)}}

    def _person_finish(self, lease: Lease, outcome: str | None) -> dict:
        """A person finished the episode with ``outcome``: the task's own check scores the screen as it is."""
        try:
            score = lease.actor.call(lambda env: env.evaluate(), timeout=self.step_timeout)
        except EnvCrashed as exc:
            self._replace(lease, reason=str(exc))
            raise ApplicationError(f"The env crashed while the task's check ran: {exc}. A fresh env replaced it and "
                                   f"a new episode started (episode {lease.episode_id}).", status=502) from exc
        self._finish(lease, reward=score, outcome=outcome or "", reason="a person finished it")
        lease.writer.flush()
        return {"index": lease.index - 1, "actor": "human", "action_text": f"finish({outcome})", "thought": "",
                "reward": score or 0.0, "done": True, "info": {"outcome": outcome}, "timings": {}}

    def _finish(self, lease: Lease, *, reward: float | None, outcome: str = "", reason: str = "done") -> None:
        lease.done = True
        lease.writer.submit(episodes.episode_finish, episode_id=lease.episode_id, status=EpisodeStatus.FINISHED,
                            end_reason=reason, reward=reward, outcome=outcome)
        self._unsupervise(lease)

    def _unsupervise(self, lease: Lease) -> None:
        if lease.supervisor is not None:
            supervisor, lease.supervisor = lease.supervisor, None
            if getattr(supervisor, "live", None) is not None:
                supervisor.live.stop()
            supervisor.close()

    def lease_end(self, *, lease_id: str, user) -> dict:
        """End the lease's episode where it stands, scored by the task's own check on the screen as it is (an RL
        caller whose model stopped acting gets the episode's reward this way); an episode already over keeps its
        reward. The lease stays, for the next reset."""
        lease = self._lease_of(lease_id=lease_id, user=user)
        with lease.lock:
            lease_check_live(lease)
            if lease.done:
                lease.writer.flush()
                reward = Episode.objects.filter(pk=lease.episode_id).values_list("env_reward", flat=True).first()
                return {"reward": reward, "ended": False}
            try:
                reward = lease.actor.call(lambda env: env.evaluate(), timeout=self.step_timeout)
            except EnvCrashed as exc:
                self._replace(lease, reason=str(exc))
                raise ApplicationError(f"The env crashed while the task's check ran: {exc}. A fresh env replaced it "
                                       f"and a new episode started (episode {lease.episode_id}).", status=502,
                                       errors={"env": ["crashed"]}) from exc
            self._finish(lease, reward=None if reward is None else float(reward), reason="the RL caller ended it")
            lease.writer.flush()
            return {"reward": reward, "ended": True}

    def lease_release(self, *, lease_id: str, user) -> None:
        lease = self._lease_of(lease_id=lease_id, user=user)
        with lease.lock:
            lease_check_live(lease)
            self._drop(lease, reason="the caller released it")

    # -- internals -------------------------------------------------------------------------
    def _start_episode(self, lease: Lease) -> None:
        name, seed = lease.task.task_name, lease.seed
        try:
            obs = lease.actor.call(lambda env: env.reset(name, seed), timeout=self.step_timeout)
        except EnvCrashed:  # a warm env whose browser died while idle: one fresh try
            lease.actor = self.pools[lease.task.env_kind].replace(lease.actor)
            try:
                obs = lease.actor.call(lambda env: env.reset(name, seed), timeout=self.step_timeout)
            except EnvCrashed as exc:
                raise ApplicationError(f"The {lease.task.env_kind} env could not start {name}: {exc}.",
                                       status=502) from exc
        lease.writer.flush()  # the last episode's steps and end are stored before the next one starts
        now = timezone.now()
        episode = Episode.objects.create(
            project_id=lease.task.project_id, task=lease.task, seed=seed, mode=Mode.AUTONOMOUS,
            status=EpisodeStatus.RUNNING, created_by=lease.user, instruction=obs.instruction,
            worker=self._worker(lease), started_at=now, heartbeat_at=now,
            screen_width=obs.width, screen_height=obs.height, rl_run=lease.run)
        episode = Episode.objects.select_related("task", "checkpoint", "created_by", "controller").get(pk=episode.pk)
        event_append(episode_id=episode.pk, type="episode.state", payload=episodes.episode_payload(episode))
        lease.episode, lease.episode_id, lease.index, lease.done, lease.observation = episode, episode.pk, 0, False, obs
        lease.rejected = {}
        if self.supervisor_factory is not None:
            lease.supervisor = self.supervisor_factory(episode)
            lease.supervisor.watch_env(ActorScreen(lease.actor))

    def _record(self, lease: Lease, obs: Observation, turn: Turn, fmt: str, *, reward: float, done: bool,
                info: dict, started: float, started_at, actor: str = "model", proposal: Turn | None = None,
                intervened_by=None) -> None:
        supervisor = lease.supervisor
        lease.writer.submit(
            steps.step_record, episode=lease.episode, index=lease.index, screenshot=obs.screenshot,
            width=obs.width, height=obs.height, url=obs.url, instruction=obs.instruction,
            elements=[e.to_dict() for e in obs.elements],
            screen_text=obs.screen_text or "", prompt=[], raw_output=turn.raw, token_ids=[], token_logprobs=[],
            thought=turn.thought, action=turn.action.to_dict() if turn.action else None,
            action_text=turn.action.to_text() if turn.action else "", actor=actor,
            proposal=steps.turn_payload(proposal), intervened_by=intervened_by,
            reward=float(reward), done=bool(done), void_reason=turn.void_reason, info=info,
            timings={"step_s": round(time.monotonic() - started, 4)}, started_at=started_at, action_format=fmt,
            linked=supervisor.step_stored if supervisor is not None else None)
        lease.index += 1

    def _end_episode(self, lease: Lease, *, status: str, reason: str) -> None:
        if lease.episode_id is not None and not lease.done:
            lease.writer.submit(episodes.episode_finish, episode_id=lease.episode_id, status=status, end_reason=reason)
        lease.done = True
        self._unsupervise(lease)
        lease.writer.flush()

    def _replace(self, lease: Lease, *, reason: str) -> None:
        self._end_episode(lease, status=EpisodeStatus.FAILED, reason=f"environment crashed: {reason}")
        lease.actor = self.pools[lease.task.env_kind].replace(lease.actor)
        self._start_episode(lease)

    def _drop(self, lease: Lease, *, reason: str, give_back: bool = True) -> None:
        """End the lease (its caller holds ``lease.lock``): its unfinished episode first, then the table's entry."""
        lease.ended = reason
        try:
            self._end_episode(lease, status=EpisodeStatus.INTERRUPTED, reason=f"lease ended: {reason}")
        finally:
            lease.writer.close()
            with self._lock:
                self._leases.pop(lease.id, None)
                self._expired[lease.id] = reason
                while len(self._expired) > EXPIRED_KEPT:
                    self._expired.pop(next(iter(self._expired)))
            pool = self.pools[lease.task.env_kind]
            if give_back:
                pool.give_back(lease.actor)
            else:
                pool.discard(lease.actor)

    def reap(self) -> list[str]:
        """End the leases whose caller stopped calling for ``lease_timeout`` s; their ids."""
        now = time.monotonic()
        with self._lock:
            stale = [lease for lease in self._leases.values() if now - lease.last_seen > self.lease_timeout]
        for lease in stale:
            if lease.lock.acquire(blocking=False):  # a call in progress is not a vanished caller
                try:
                    self._drop(lease, reason=f"no call for {self.lease_timeout:g} s, so the caller was taken "
                                             "to be gone")
                finally:
                    lease.lock.release()
        return [lease.id for lease in stale]

    def _worker(self, lease: Lease) -> str:
        return f"envservice:{self.host}:{lease.id[:8]}"

    def heartbeat(self) -> None:
        """Say the leased episodes are alive, as a rollout worker does: beat's liveness sweep marks a running
        episode interrupted after LOUPE_INTERRUPTED_AFTER_SECONDS without a heartbeat, and an RL job may think
        longer than that between two steps."""
        with self._lock:
            live = [lease for lease in self._leases.values() if not lease.done and lease.episode_id]
        for lease in live:
            episodes.episode_heartbeat(episode_id=lease.episode_id, worker=self._worker(lease))

    def _reap_loop(self) -> None:
        while not self._stop.wait(min(5.0, max(self.lease_timeout / 4, 0.2))):
            try:
                self.reap()
                self.heartbeat()
                host_status.host_publish(self.status())
            except Exception:  # noqa: BLE001 - the reaper keeps going; the next sweep tries again
                log.exception("reaping leases failed")
            finally:
                close_old_connections()

    def close(self) -> None:
        self._stop.set()
        try:
            host_status.host_withdraw(self.address)
        except Exception:  # noqa: BLE001 - Redis gone: the report goes silent on the status page, then is dropped
            log.warning("could not take this host's report off the status page", exc_info=True)
        for lease in list(self._leases.values()):
            try:
                self._drop(lease, reason="the service stopped", give_back=False)
            except Exception:  # noqa: BLE001 - stopping: end the others all the same
                log.exception("ending lease %s failed", lease.id)
        for pool in self.pools.values():
            pool.close()


def _task_of(*, project_id: int, task: str | int) -> TaskSpec:
    specs = TaskSpec.objects.filter(project_id=project_id)
    if isinstance(task, int) or (isinstance(task, str) and task.isdigit()):
        found = specs.filter(pk=int(task)).first()
    else:
        found = specs.filter(task_name=task).order_by("-split").first()  # train before eval
    if found is None:
        names = ", ".join(sorted(set(specs.values_list("task_name", flat=True)))) or "none yet"
        raise ApplicationError(f"No task '{task}' in project {project_id}; its tasks: {names}.", status=404,
                               errors={"task": ["Unknown task."]})
    return found


def _read_turn(text: str, fmt: str, obs: Observation) -> Turn:
    if fmt == "loupe" and "action:" not in text.lower():
        text = f"Action: {text}"  # a bare action, e.g. click(x=1, y=2)
    return parse(text, format=fmt, width=obs.width, height=obs.height)


_current: EnvService | None = None


def current() -> EnvService:
    if _current is None:
        raise ApplicationError("The environment service is not running in this process; start it with "
                               "python manage.py envservice.", status=503)
    return _current


def install(service: EnvService | None) -> None:
    global _current
    _current = service
