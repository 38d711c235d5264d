"""REST for flywheel cycles, their settings and deployment rollback. Members read; managers act."""
from __future__ import annotations

from django.db.models import Prefetch
from drf_spectacular.utils import extend_schema, extend_schema_view, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import LimitedCharField, OpenRecord, StrictSerializer, UserRef, keyset_page
from core.errors import ApplicationError
from cycles import cycle_settings, cycles, decide, evaluation, stages
from cycles.models import Cycle, CycleState, Evaluation
from projects import selectors
from projects.api import for_role, paginate
from projects.api_settings import SettingsSectionApi
from projects.models import Role
from rollouts.api_episodes import CheckpointRef
from rollouts.models import Backend, Deployment
from snapshots.models import SnapshotKind, SnapshotStatus
from training import deployments
from training.api import RunOutput, run_output


def _ref(checkpoint) -> dict | None:
    return {"id": checkpoint.pk, "name": checkpoint.name} if checkpoint is not None else None


def evaluation_output(evaluation: Evaluation) -> dict:
    return {"id": evaluation.pk, "checkpoint": _ref(evaluation.checkpoint), "role": evaluation.role,
            "success_rate": evaluation.success_rate, "mean_reward": evaluation.mean_reward,
            "episodes": evaluation.episodes, "seeds": evaluation.seeds, "per_task": evaluation.details.get("per_task", {}),
            "eval_seconds": evaluation.details.get("eval_seconds"), "created_at": evaluation.created_at,
            "reused_from": evaluation.details.get("reused_from")}  # measured on these seeds in an earlier cycle


# --- what the answers hold (the schema's types; the dicts above and below build them) ----------------------------
class TaskEvalOutput(serializers.Serializer):
    episodes = serializers.IntegerField()
    success_rate = serializers.FloatField()
    mean_reward = serializers.FloatField()
    mean_steps = serializers.FloatField()
    void_rate = serializers.FloatField()


class EvaluationOutput(serializers.Serializer):
    id = serializers.IntegerField()
    checkpoint = CheckpointRef()
    role = serializers.ChoiceField(choices=["candidate", "deployed", ""], help_text="candidate: the checkpoint this "
                                   "cycle trained; deployed: what served when it was measured.")
    success_rate = serializers.FloatField(allow_null=True)
    mean_reward = serializers.FloatField(allow_null=True)
    episodes = serializers.IntegerField()
    seeds = serializers.DictField(child=serializers.CharField(), help_text='Seed range by task: {"click-test": '
                                                                          '"100000-100009"}.')
    per_task = serializers.DictField(child=TaskEvalOutput())
    eval_seconds = serializers.FloatField(allow_null=True)
    created_at = serializers.DateTimeField()
    reused_from = inline_serializer("EvaluationReusedFrom", {
        "cycle": serializers.IntegerField(), "evaluation": serializers.IntegerField(),
        "eval_seconds": serializers.FloatField(allow_null=True)}, allow_null=True,
        help_text="Measured in an earlier cycle on exactly these seeds, not rolled out again.")


class StageOutput(serializers.Serializer):
    """One stage of the training recipe; stages run in order, each from the last one's output."""

    algorithm = serializers.ChoiceField(choices=["sft", "dpo", "rl"])
    max_steps = serializers.IntegerField()
    max_seconds = serializers.IntegerField(required=False)
    max_epochs = serializers.IntegerField(required=False, help_text="Passes over the stage's rows at most (0: no "
                                                                    "cap); not for rl stages.")
    lr = serializers.FloatField(required=False)
    lora = serializers.CharField(required=False)
    batch_tokens = serializers.IntegerField(required=False)
    min_rows = serializers.IntegerField(required=False)
    group_size = serializers.IntegerField(required=False)
    max_new_tokens = serializers.IntegerField(required=False)


class GateBucketOutput(serializers.Serializer):
    rows = serializers.IntegerField()
    new_rows = serializers.IntegerField()
    new_differing = serializers.IntegerField(required=False, help_text="dpo: new pairs whose actions differ.")


class GateOutput(OpenRecord):
    buckets = serializers.DictField(child=GateBucketOutput(), help_text="By bucket (sft, dpo, rl).")
    new_rows = serializers.IntegerField()
    min_new_rows = serializers.IntegerField()


class CycleConfigOutput(OpenRecord):
    """The settings a cycle ran with (those of its time)."""

    min_new_rows = serializers.IntegerField(required=False)
    recipe = StageOutput(many=True, required=False)
    eval_tasks = serializers.ListField(child=serializers.IntegerField(), required=False)
    eval_seeds = serializers.IntegerField(required=False)
    eval_max_steps = serializers.IntegerField(required=False)
    margin = serializers.FloatField(required=False)
    auto_deploy = serializers.BooleanField(required=False)
    backend = serializers.CharField(required=False)
    export = serializers.CharField(required=False)


class CycleSideOutput(serializers.Serializer):
    checkpoint = serializers.CharField()
    success_rate = serializers.FloatField(allow_null=True)
    episodes = serializers.IntegerField()


class LearnedShareOutput(serializers.Serializer):
    corrections = serializers.IntegerField()
    learned = serializers.IntegerField()
    share = serializers.FloatField(allow_null=True)


class LearnedOutput(serializers.Serializer):
    """Whether the candidate learned the corrections it trained on, and those held out (cycles/learned.py)."""

    trained = LearnedShareOutput()
    held_out = LearnedShareOutput(help_text="The validation split's corrections: the honest figure.")
    by_task = inline_serializer("LearnedByTaskOutput", {"task": serializers.CharField(), "trained": LearnedShareOutput(),
                                                        "held_out": LearnedShareOutput()}, many=True)
    by_kind = inline_serializer("LearnedByKindOutput", {"kind": serializers.CharField(),
                                                        "trained": LearnedShareOutput(),
                                                        "held_out": LearnedShareOutput()}, many=True)
    not_replayed = serializers.CharField(required=False)
    error = serializers.CharField(required=False)


class CycleDecisionOutput(OpenRecord):
    """The gate's verdict with its numbers (decide.decision_of)."""

    text = serializers.CharField()
    promote = serializers.BooleanField()
    margin = serializers.FloatField()
    gain = serializers.FloatField(required=False)
    candidate = CycleSideOutput()
    deployed = CycleSideOutput(allow_null=True)
    by = serializers.CharField(required=False, help_text="Who deployed it by hand.")
    learned = LearnedOutput(required=False, allow_null=True)


class CycleDecisionDataOutput(OpenRecord):
    gate = GateOutput(required=False)
    decision = CycleDecisionOutput(required=False)
    awaiting_approval = serializers.BooleanField(required=False)
    learned = LearnedOutput(required=False)


class CycleTimingOutput(serializers.Serializer):
    started = serializers.DateTimeField()
    finished = serializers.DateTimeField(required=False)
    seconds = serializers.FloatField(required=False)


class CycleProgressOutput(OpenRecord):
    """Of the long state now running (snapshot, evaluate): done of total, and what."""

    done = serializers.IntegerField(required=False)
    total = serializers.IntegerField(required=False)
    label = serializers.CharField(required=False)


class CycleOutput(serializers.Serializer):
    """A cycle as a member of the role in the context reads it (server paths for admins only)."""

    id = serializers.IntegerField()
    project = serializers.IntegerField()
    iteration = serializers.IntegerField()
    state = serializers.ChoiceField(choices=CycleState.values)
    trigger = serializers.CharField()
    triggered_by = UserRef(allow_null=True)
    config = CycleConfigOutput()
    decision = serializers.CharField()
    decision_data = CycleDecisionDataOutput()
    awaiting_approval = serializers.BooleanField()
    error = serializers.CharField()
    log_tail = serializers.CharField()
    timings = serializers.DictField(child=CycleTimingOutput(), help_text="By state.")
    progress = CycleProgressOutput()
    candidate = CheckpointRef(allow_null=True)
    baseline = CheckpointRef(allow_null=True)
    deployment = serializers.IntegerField(allow_null=True)
    snapshots = inline_serializer("CycleSnapshotOutput", {
        "id": serializers.IntegerField(), "kind": serializers.ChoiceField(choices=SnapshotKind.choices),
        "rows": serializers.IntegerField(), "status": serializers.ChoiceField(choices=SnapshotStatus.values),
        "sha256": serializers.CharField()}, many=True)
    run = RunOutput(allow_null=True)
    evaluations = EvaluationOutput(many=True)
    started_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)

    def to_representation(self, cycle: Cycle) -> dict:
        return for_role(self.fields_of(cycle), self.context.get("role"))

    @staticmethod
    def fields_of(cycle: Cycle) -> dict:
        return {
            "id": cycle.pk, "project": cycle.project_id, "iteration": cycle.iteration, "state": cycle.state,
            "trigger": cycle.trigger,
            "triggered_by": {"id": cycle.triggered_by_id, "username": cycle.triggered_by.username}
            if cycle.triggered_by_id else None,
            "config": cycle.config, "decision": cycle.decision, "decision_data": cycle.decision_data,
            "awaiting_approval": cycle.state == CycleState.DECIDE and bool(cycle.decision_data.get("awaiting_approval")),
            "error": cycle.error, "log_tail": cycle.log_tail[-4000:], "timings": cycle.timings,
            "progress": cycle.progress, "candidate": _ref(cycle.candidate), "baseline": _ref(cycle.baseline),
            "deployment": cycle.deployment_id,
            "snapshots": [{"id": s.pk, "kind": s.kind, "rows": s.rows, "status": s.status, "sha256": s.sha256}
                          for s in cycle.snapshots.all()],
            "run": run_output(cycle.run) if cycle.run_id else None,
            "evaluations": [evaluation_output(e) for e in cycle.evaluations.all()],
            "started_at": cycle.started_at, "updated_at": cycle.updated_at, "finished_at": cycle.finished_at,
        }


def _cycles():
    return Cycle.objects.select_related("triggered_by", "candidate", "baseline", "run__checkpoint").prefetch_related(
        "snapshots", Prefetch("evaluations", queryset=Evaluation.objects.select_related("checkpoint").order_by("id")))


def _cycle_for(request, cycle_id: int, minimum: str = Role.ANNOTATOR) -> tuple[Cycle, str]:
    """The cycle and the person's role in its project."""
    cycle = _cycles().filter(pk=cycle_id).first()
    if cycle is None or selectors.project_role(user=request.user, project=cycle.project_id) is None:
        raise ApplicationError("No such cycle, or you are not a member of its project.", status=404)
    _, role = selectors.project_for_user(user=request.user, project_id=cycle.project_id, minimum=minimum)
    return cycle, role


def _cycle_output(cycle_id: int, role: str) -> dict:
    return CycleOutput(_cycles().get(pk=cycle_id), context={"role": role}).data


class CycleListApi(APIView):
    """A project's cycles, newest first; POST runs one now (managers; 409 while one runs)."""

    @extend_schema(operation_id="projects_cycles_list", responses={200: keyset_page(CycleOutput, "CyclePage")})
    def get(self, request, project_id: int):
        project, role = selectors.project_for_user(user=request.user, project_id=project_id)
        return paginate(self, _cycles().filter(project=project), CycleOutput, ordering="-id", role=role)

    @extend_schema(request=None, responses={202: CycleOutput})
    def post(self, request, project_id: int):
        project, role = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.MANAGER)
        cycle = cycles.cycle_start(project=project, actor=request.user, trigger="manual")
        return Response(_cycle_output(cycle.pk, role), status=status.HTTP_202_ACCEPTED)


class CycleDetailApi(APIView):
    @extend_schema(responses={200: CycleOutput})
    def get(self, request, cycle_id: int):
        cycle, role = _cycle_for(request, cycle_id)
        return Response(CycleOutput(cycle, context={"role": role}).data)


class CycleApproveApi(APIView):
    """Deploy a candidate by hand: one awaiting approval, or one the gate rejected (managers)."""

    @extend_schema(request=None, responses={200: CycleOutput})
    def post(self, request, cycle_id: int):
        cycle, role = _cycle_for(request, cycle_id, Role.MANAGER)
        cycle = decide.cycle_approve(cycle=cycle, actor=request.user)
        return Response(_cycle_output(cycle.pk, role))


class CycleRejectInput(StrictSerializer):
    reason = LimitedCharField("reject_reason", required=False, allow_blank=True, default="")


class CycleRejectApi(APIView):
    """Turn down a candidate that awaits approval (managers)."""

    @extend_schema(request=CycleRejectInput, responses={200: CycleOutput})
    def post(self, request, cycle_id: int):
        data = CycleRejectInput(data=request.data)
        data.is_valid(raise_exception=True)
        cycle, role = _cycle_for(request, cycle_id, Role.MANAGER)
        cycle = decide.cycle_reject(cycle=cycle, actor=request.user, reason=data.validated_data["reason"])
        return Response(_cycle_output(cycle.pk, role))


class StageInput(StrictSerializer):
    algorithm = serializers.ChoiceField(choices=["sft", "dpo", "rl"])
    max_steps = serializers.IntegerField(required=False, help_text="optimizer steps at most; max_epochs usually ends "
                                                                   "the stage first, so its steps follow the rows")
    max_seconds = serializers.IntegerField(required=False, help_text="time budget of the stage in seconds (none: no "
                                                                     "limit)")
    max_epochs = serializers.IntegerField(required=False, help_text="passes over the stage's rows at most (0: no cap)")
    lr = serializers.FloatField(required=False, help_text="peak learning rate; small from a deployed checkpoint that "
                                                          "already works (sft default 0.001)")
    lora = serializers.CharField(required=False, allow_blank=True, max_length=100,
                                 help_text="train a LoRA adapter, e.g. r=8; empty: all weights")
    batch_tokens = serializers.IntegerField(required=False, help_text="sft/dpo: tokens per batch (smaller: more "
                                                                      "steps a pass over the rows)")
    min_rows = serializers.IntegerField(required=False, help_text="the gate drops this stage with fewer new rows "
                                                                  "(dpo: pairs whose actions differ); defaults "
                                                                  "sft 8, dpo 1, rl 4")
    group_size = serializers.IntegerField(required=False, help_text="rl of a VLM (GRPO): answers sampled per prompt, 2-64")
    max_new_tokens = serializers.IntegerField(required=False, help_text="rl of a VLM (GRPO): an answer's length at most")


class CycleSettingsInput(StrictSerializer):
    min_new_rows = serializers.IntegerField(required=False)
    recipe = StageInput(many=True, required=False)
    eval_tasks = serializers.ListField(child=serializers.IntegerField(), required=False, max_length=100)
    eval_seeds = serializers.IntegerField(required=False)
    eval_max_steps = serializers.IntegerField(required=False)
    margin = serializers.FloatField(required=False)
    auto_deploy = serializers.BooleanField(required=False)
    backend = serializers.ChoiceField(choices=["local", "openai"], required=False)
    export = serializers.ChoiceField(choices=["lora", "full"], required=False)
    base_checkpoint = serializers.IntegerField(required=False, allow_null=True)
    replay_ratio = serializers.FloatField(required=False, help_text="SFT: rows replayed from what the deployed "
                                          "checkpoint was trained on (its snapshots and the cold-start demonstrations) "
                                          "per new row, 0-100; 0: the new rows alone")
    replay_max_rows = serializers.IntegerField(required=False, help_text="SFT: the mix of new and replayed rows holds "
                                                                         "at most this many")
    correction_weight = serializers.IntegerField(required=False, help_text="SFT: each row of a step a person "
                                                 "corrected (an edit, a takeover) counts this many times in the mix "
                                                 "(1-100); the approved steps are the checkpoint's own answers")
    val_fraction = serializers.FloatField(required=False, help_text="SFT: share of the new rows held out for the "
                                                                    "validation loss (0-0.5; 0: none)")
    val_min_rows = serializers.IntegerField(required=False, help_text="SFT: at least this many new rows held out")
    val_from = serializers.ChoiceField(
        choices=["corrected", "new"], required=False,
        help_text="SFT: what the validation loss reads. corrected: some of the steps people corrected plus as many "
                  "replayed rows (it falls while the model learns the corrections, rises when it forgets); new: a "
                  "sample of all new rows")
    patience = serializers.IntegerField(required=False, help_text="SFT: stop when the validation loss has not "
                                                                  "improved for this many progress lines; the "
                                                                  "candidate keeps its best weights (0: never stop)")
    history_images = serializers.IntegerField(
        required=False, help_text="earlier screenshots a screen-reading checkpoint gets besides the current one (0-10)")
    cadence_minutes = serializers.IntegerField(required=False)


class EvalPlanOutput(serializers.Serializer):
    env = serializers.CharField()
    seeds = serializers.CharField()
    max_steps = serializers.IntegerField()
    tasks = serializers.ListField(child=serializers.CharField())
    definitions = serializers.DictField(required=False, help_text="An authored task's JSON, by task name.")


class CycleSettingsOutput(serializers.Serializer):
    """What settings_output builds: the settings, the schedule, what the gate sees now and the eval plan."""

    min_new_rows = serializers.IntegerField()
    recipe = StageOutput(many=True)
    replay_ratio = serializers.FloatField()
    replay_max_rows = serializers.IntegerField()
    correction_weight = serializers.IntegerField()
    val_fraction = serializers.FloatField()
    val_min_rows = serializers.IntegerField()
    val_from = serializers.ChoiceField(choices=["corrected", "new"])
    patience = serializers.IntegerField()
    eval_tasks = serializers.ListField(child=serializers.IntegerField())
    eval_seeds = serializers.IntegerField()
    eval_max_steps = serializers.IntegerField()
    margin = serializers.FloatField()
    auto_deploy = serializers.BooleanField()
    backend = serializers.ChoiceField(choices=["local", "openai"])
    export = serializers.ChoiceField(choices=["lora", "full"])
    base_checkpoint = serializers.IntegerField(allow_null=True)
    history_images = serializers.IntegerField()
    cadence_minutes = serializers.FloatField(allow_null=True, help_text="0: no schedule (manual runs only).")
    schedule = serializers.CharField()
    last_scheduled_at = serializers.DateTimeField(allow_null=True)
    gate = GateOutput()
    eval_plan = EvalPlanOutput(many=True)
    eval_plan_error = serializers.CharField()
    eval_task_choices = inline_serializer("EvalTaskChoiceOutput", {
        "id": serializers.IntegerField(), "task_name": serializers.CharField(),
        "seed_start": serializers.IntegerField(), "seed_end": serializers.IntegerField()}, many=True)


def settings_output(project) -> dict:
    """The settings, the schedule, what the gate sees now and the eval plan (or why there is none)."""
    config = cycle_settings.settings_of(project)
    try:
        plan, plan_error = evaluation.eval_plan(project, config), ""
    except ApplicationError as exc:
        plan, plan_error = [], exc.message
    rows = stages.bucket_rows(project, config)
    eval_tasks = project.tasks.filter(split="eval").order_by("task_name")
    return {**{k: config[k] for k in cycle_settings.DEFAULTS}, **cycle_settings.cadence_of(project),
            "gate": {"buckets": rows, "new_rows": sum(b["new_rows"] for b in rows.values()),
                     "min_new_rows": config["min_new_rows"]},
            "eval_plan": plan, "eval_plan_error": plan_error,
            "eval_task_choices": [{"id": t.pk, "task_name": t.task_name, "seed_start": t.seed_start,
                                   "seed_end": t.seed_end} for t in eval_tasks]}


@extend_schema_view(get=extend_schema(responses={200: CycleSettingsOutput}),
                    patch=extend_schema(request=CycleSettingsInput, responses={200: CycleSettingsOutput}))
class CycleSettingsApi(SettingsSectionApi):
    """A project's cycle settings and schedule (GET: members; PATCH: managers)."""
    section, input_serializer, read_role = cycle_settings.CYCLE_SETTINGS, CycleSettingsInput, Role.ANNOTATOR

    def output(self, project):
        return settings_output(project)

    def set(self, project, actor, changes):
        if "recipe" in changes:
            changes["recipe"] = [dict(stage) for stage in changes["recipe"]]
        cycle_settings.settings_set(project=project, actor=actor, **changes)  # with the schedule (cadence_minutes)


class DeploymentRollbackApi(APIView):
    """Serve an earlier deployment's checkpoint again, atomically (managers; audited)."""

    @extend_schema(request=None, responses={200: inline_serializer("DeploymentRolledBack", {
        "id": serializers.IntegerField(), "checkpoint": CheckpointRef(), "backend": serializers.ChoiceField(
            choices=Backend.values), "served_name": serializers.CharField(), "active": serializers.BooleanField(),
        "activated_at": serializers.DateTimeField(allow_null=True),
        "deactivated_at": serializers.DateTimeField(allow_null=True), "reason": serializers.CharField()})})
    def post(self, request, project_id: int, deployment_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.MANAGER)
        deployment = Deployment.objects.select_related("checkpoint").filter(pk=deployment_id, project=project).first()
        if deployment is None:
            raise ApplicationError("No such deployment in this project.", status=404)
        restored = deployments.deployment_rollback(project=project, deployment=deployment, actor=request.user)
        return Response({"id": restored.pk, "checkpoint": _ref(restored.checkpoint), "backend": restored.backend,
                         "served_name": restored.served_name, "active": restored.active,
                         "activated_at": restored.activated_at, "deactivated_at": restored.deactivated_at,
                         "reason": restored.reason})
