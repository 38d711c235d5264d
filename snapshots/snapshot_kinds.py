"""Snapshot kinds: one class a bucket (``sft``, ``ct``, ``dpo``, ``rl``, ``prm``), each saying which finished episodes
belong to it, which of their steps make rows, how many rows they make, the rows of one episode, and what to tell a
person whose filter leaves none. Adding a kind is a class here and its line in :data:`KINDS`.

Buckets: V=1 episodes (rollouts/routing.py) -> ``sft`` (autonomous successes are tagged ``rft``), V=0 -> ``ct``; every
corrected step -> a ``dpo`` pair (a person's turn over the model's proposal, only where it changed the action, or
only the thought and marked so), and every rejected proposal of a step that then did something else -> a ``dpo``
pair too, and so is a branch's first own step whose action differs from its parent's step on the identical state
(snapshots/branch_pairs.py); finished autonomous model episodes with a reward -> ``rl`` (a GRPO row a step, for every
target); finished episodes whose reviews labelled steps -> ``prm``
(a row a labelled step, up to the first bad one: snapshots/prm_labels.py)."""
from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Exists, F, OuterRef, Q, QuerySet

from agent.actions import Action
from agent.rows import PRMRow, RenderedFor, SFTRow, StepView, prompt_text, render_prompt, render_turn
from core.errors import ApplicationError
from rollouts.models import Actor, Correction, Episode, Mode, Rejection, Step
from rollouts.routing import valid_q
from snapshots.branch_pairs import branch_pair_count, branch_pairs
from snapshots.models import SnapshotKind
from snapshots.prm_labels import prm_row_steps, prm_step_labels
from snapshots.rows import (
    assistant,
    branch_pair_rows,
    dpo_rows,
    grpo_row,
    judge_meta,
    row_meta,
    step_feedback,
    step_rejections,
    step_thought,
    step_view,
)


def own_steps(steps: QuerySet[Step]) -> QuerySet[Step]:
    """``steps`` without a branch's copies of its parent's steps (``info.replayed_from``): they are the parent's
    rows already, and would be trained on twice."""
    return steps.exclude(info__has_key="replayed_from")


@dataclass
class Walk:
    """One episode's steps as its rows are made of them, in order: what came before each step (the prompt's
    history, the actions a GRPO row replays) and what a kind keeps across steps (``state``)."""
    episode: Episode
    target: RenderedFor
    history: list[StepView] = field(default_factory=list)
    prefix: list[Action] = field(default_factory=list)  # the canonical actions that brought the env to the step
    views: dict[int, tuple[StepView, int]] = field(default_factory=dict)  # index -> view, steps before it
    screens: dict = field(default_factory=dict)  # each step's screen text, rendered once (render_prompt)
    state: dict = field(default_factory=dict)

    def prompt(self, step: Step, view: StepView) -> tuple[list[dict], list[str]]:
        """The prompt ``step`` was sent (with the feedback of its rejected proposals), rendered for the target."""
        return render_prompt(view, self.history, self.target, screens=self.screens,
                             feedback=step_feedback(step_rejections(step), step, self.target))


class Kind:
    """A snapshot kind. The defaults make one row a step of the bucket's own steps."""
    name: str = ""
    reads_tokens = False  # whether its rows need the steps' token ids and log-probs

    def episodes(self, finished: QuerySet[Episode], routing: dict) -> QuerySet[Episode]:
        """The project's finished episodes whose rows belong here, under ``routing``."""
        raise NotImplementedError

    def steps(self, episodes: QuerySet[Episode]) -> QuerySet[Step]:
        """The steps of ``episodes`` that make rows of this kind."""
        return own_steps(Step.objects.filter(episode__in=episodes))

    def row_count(self, episodes: QuerySet[Episode], target: RenderedFor | None) -> int:
        return self.steps(episodes).count()

    def sub_buckets(self, episodes: QuerySet[Episode]) -> dict[str, QuerySet[Episode]]:
        """Named parts of the bucket a dashboard counts on their own."""
        return {}

    def rows_within(self, episodes: QuerySet[Episode], routing: dict) -> object:
        """What can change the bucket's rows while its episodes stay the same (None: nothing)."""
        return None

    def empty_message(self) -> str:
        return (f"No {self.name} rows match this filter: nothing to snapshot. Finish or review episodes first, "
                "or widen the filter.")

    # --- rows ---
    def keeps_copies(self, target: RenderedFor) -> bool:
        """Whether a branch's copies of its parent's steps make rows here (they are the parent's rows otherwise)."""
        return False

    def begin(self, walk: Walk, steps: list[Step]) -> None:
        """Before the first step of an episode."""

    def step_rows(self, walk: Walk, step: Step, view: StepView, chosen: str) -> list[dict]:
        """The rows one step makes; ``chosen``: its executed turn in the target's format."""
        return []

    def end_rows(self, walk: Walk) -> list[dict]:
        """The rows the whole episode makes after its steps."""
        return []

    def episode_rows(self, episode: Episode, steps: list[Step], target: RenderedFor) -> list[dict]:
        """The rows of one episode (``steps`` ordered by index) rendered for ``target`` from the steps' structure.
        ApplicationError names a step that cannot be written in the target's format."""
        walk = Walk(episode=episode, target=target)
        self.begin(walk, steps)
        rows: list[dict] = []
        for step in steps:
            view = step_view(step)
            copied = "replayed_from" in (step.info or {})  # a branch's copy of its parent's step
            try:
                chosen = render_turn(step_thought(step), view.action, target, step.width, step.height,
                                     raw=step.raw_output)
                if not copied or self.keeps_copies(target):  # a copy stays in the history all the same
                    rows.extend(self.step_rows(walk, step, view, chosen))
            except ValueError as exc:
                raise ApplicationError(f"Step {step.index} of episode {episode.pk} cannot be written for the deployed "
                                       f"checkpoint ({target.describe()}): {exc}") from None
            walk.views[step.index] = (view, len(walk.history))
            walk.history.append(view)
            if view.action is not None:
                walk.prefix.append(view.action)
        return rows + self.end_rows(walk)


class _Routed(Kind):
    """SFT and CT: the steps of episodes the validator routed here, void turns left out; a row a step, the prompt and
    the executed turn as one conversation."""
    valid = True

    def episodes(self, finished, routing):
        return finished.filter(valid_q(routing)[0 if self.valid else 1])

    def steps(self, episodes):
        return super().steps(episodes).filter(void=False)

    def step_rows(self, walk, step, view, chosen):
        if step.void:
            return []
        prompt, images = walk.prompt(step, view)
        source = "rft" if walk.episode.mode == Mode.AUTONOMOUS else "supervised"
        return [SFTRow(messages=[*prompt, *assistant(chosen)], images=images,
                       meta=row_meta(walk.episode, step, source=source), rendered_for=walk.target).to_dict()]


class SFT(_Routed):
    name = SnapshotKind.SFT

    def sub_buckets(self, episodes):
        # rejection-sampled fine-tuning rows: the autonomous successes, frozen with SFT
        return {"rft": episodes.filter(mode=Mode.AUTONOMOUS)}


class CT(_Routed):
    name, valid = SnapshotKind.CT, False


def _dpo_steps() -> QuerySet[Step]:
    """Steps where a person's turn replaced the model's and changed something: the action, or (an edit) the
    thought. A takeover that did what the model proposed teaches nothing. A branch's copies of its parent's steps
    are left out."""
    return own_steps(Step.objects).filter(proposal__isnull=False, action__isnull=False,
                                          actor__in=[Actor.EDITED, Actor.HUMAN],
                                          correction__in=[Correction.ACTION, Correction.THOUGHT])


def _dpo_rejections() -> QuerySet[Rejection]:
    """Rejected proposals whose step then ran another action: the executed turn is preferred over them."""
    return Rejection.objects.filter(step__isnull=False, step__action__isnull=False).exclude(action=F("step__action"))


class DPO(Kind):
    """Preference pairs: corrections, rejected proposals, and a branch against its parent."""
    name = SnapshotKind.DPO

    def episodes(self, finished, routing):
        return finished.filter(Exists(_dpo_steps().filter(episode=OuterRef("pk")))
                               | Exists(_dpo_rejections().filter(episode=OuterRef("pk")))
                               | Q(pk__in=list(branch_pairs(finished, routing))))

    def steps(self, episodes):
        return Step.objects.filter(episode__in=episodes).filter(
            Q(pk__in=_dpo_steps().filter(episode__in=episodes).values("pk"))
            | Q(pk__in=_dpo_rejections().filter(episode__in=episodes).values("step_id"))
            | Q(pk__in=[pair["branch_step"].pk for pair in branch_pairs(episodes).values()]))

    def row_count(self, episodes, target):
        return (_dpo_steps().filter(episode__in=episodes).count()
                + _dpo_rejections().filter(episode__in=episodes).count() + branch_pair_count(episodes))

    def differing_count(self, episodes: QuerySet[Episode]) -> int:
        """The pairs of ``episodes`` whose chosen action differs from the rejected one: corrections of the action,
        rejected proposals the step then replaced and branch pairs (an edit of the thought alone keeps the action
        and is the rest of the bucket)."""
        return (_dpo_steps().filter(episode__in=episodes, correction=Correction.ACTION).count()
                + _dpo_rejections().filter(episode__in=episodes).count() + branch_pair_count(episodes))

    def rows_within(self, episodes, routing):
        # which side each branch pair chose: a review or a judgement since changes it
        return sorted((pk, pair["index"], pair["chosen"]) for pk, pair in branch_pairs(episodes, routing).items())

    def step_rows(self, walk, step, view, chosen):
        return dpo_rows(step, view, walk.history, chosen, walk.target, walk.episode)

    def end_rows(self, walk):
        if walk.episode.parent_id is None:
            return []
        return branch_pair_rows(walk.episode, walk.views, walk.history, walk.target)


class RL(Kind):
    """On-policy episodes, one GRPO row a step (agent.rows.GRPORow) for every target: GRPO through TRL
    (trainer/grpo.py) samples fresh answers to the step's prompt and scores each in the real env, replayed to the step
    by the episode's actions before it. A target that reads screenshots gets the step's (a step without one makes no
    row); a text target reads the screen as words. Void steps are included: the model was prompted there and wrote
    nothing the env could run, which is where fresh answers have most to teach."""
    name = SnapshotKind.RL

    def episodes(self, finished, routing):
        return finished.filter(mode=Mode.AUTONOMOUS, env_reward__isnull=False, n_interventions=0)

    def row_count(self, episodes, target):
        steps = self.steps(episodes)
        return (steps.exclude(screenshot="") if target is not None and target.reads_images else steps).count()

    def step_rows(self, walk, step, view, chosen):
        if walk.target.reads_images and not step.screenshot:
            return []
        return [grpo_row(step, view, walk.history, walk.prefix, walk.target, walk.episode)]


class PRM(Kind):
    """Process-reward rows: a labelled step a row, up to the first bad one."""
    name = SnapshotKind.PRM

    def episodes(self, finished, routing):
        return finished.filter(review_summary__has_key="step_labels")

    def row_count(self, episodes, target):
        own: dict[int, set[int]] = {}
        for episode_id, index in self.steps(episodes).values_list("episode_id", "index"):
            own.setdefault(episode_id, set()).add(index)
        return sum(len(prm_row_steps(prm_step_labels(episode), own.get(episode.pk, set())))
                   for episode in episodes.only("pk", "review_summary"))

    def rows_within(self, episodes, routing):
        # a reviewer labels more steps of an episode already in the bucket
        return [summary.get("step_labels") for summary in
                episodes.order_by("pk").values_list("review_summary", flat=True)]

    def empty_message(self):
        return ("No prm rows match this filter: nothing to snapshot. Process-reward rows come from step labels: on a "
                "finished episode's replay, label steps good, wasteful, wrong or critical and save the review (a "
                "branch's replayed steps are its parent's and make no rows of their own).")

    def begin(self, walk, steps):
        labels = prm_step_labels(walk.episode)
        walk.state.update(labels=labels, judge=judge_meta(walk.episode), at=set(prm_row_steps(
            labels, {s.index for s in steps if "replayed_from" not in (s.info or {})})))

    def step_rows(self, walk, step, view, chosen):
        if step.index not in walk.state["at"]:
            return []
        prompt, images = walk.prompt(step, view)
        label = walk.state["labels"][step.index]
        return [PRMRow(prompt=prompt_text(prompt), completions=[chosen], labels=[label["good"]],
                       prompt_messages=prompt, images=images,
                       meta=row_meta(walk.episode, step, label_source="review", step_labels=label["labels"],
                                     reviewers=sorted(label["labels"]), first_error=not label["good"],
                                     review_status=walk.episode.review_status, judge=walk.state["judge"]),
                       rendered_for=walk.target).to_dict()]


KINDS: dict[str, Kind] = {kind.name: kind for kind in (SFT(), DPO(), RL(), CT(), PRM())}  # SnapshotKind's order
DPO_KIND = KINDS[SnapshotKind.DPO]


def kind_of(name: str) -> Kind:
    """The kind called ``name``; an unknown one is refused naming the known ones."""
    try:
        return KINDS[name]
    except (KeyError, TypeError):
        raise ApplicationError(f"Unknown kind '{name}'; use {', '.join(SnapshotKind.values)}.",
                               errors={"kind": ["Invalid choice."]}) from None
