from django.contrib import admin

from flywheel import models


class MembershipInline(admin.TabularInline):
    model = models.Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(models.Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "created_at"]
    search_fields = ["name", "slug"]
    inlines = [MembershipInline]


@admin.register(models.TaskSpec)
class TaskSpecAdmin(admin.ModelAdmin):
    list_display = ["task_name", "project", "env_kind", "split", "seed_start", "seed_end", "max_steps"]
    list_filter = ["project", "split", "env_kind"]


@admin.register(models.Checkpoint)
class CheckpointAdmin(admin.ModelAdmin):
    list_display = ["name", "project", "base_model", "parent", "created_at"]
    list_filter = ["project"]


@admin.register(models.Deployment)
class DeploymentAdmin(admin.ModelAdmin):
    list_display = ["project", "checkpoint", "backend", "active", "activated_at", "deactivated_at"]
    list_filter = ["project", "active", "backend"]


class StepInline(admin.TabularInline):
    model = models.Step
    extra = 0
    fields = ["index", "actor", "action_text", "reward", "void", "void_reason"]
    readonly_fields = fields
    can_delete = False
    show_change_link = True


@admin.register(models.Episode)
class EpisodeAdmin(admin.ModelAdmin):
    list_display = ["id", "project", "task", "seed", "mode", "status", "outcome", "env_reward", "n_steps", "created_at"]
    list_filter = ["project", "mode", "status", "outcome"]
    raw_id_fields = ["checkpoint", "task", "created_by", "controller"]
    inlines = [StepInline]


@admin.register(models.Step)
class StepAdmin(admin.ModelAdmin):
    list_display = ["episode", "index", "actor", "action_text", "reward", "void"]
    list_filter = ["actor", "void"]
    raw_id_fields = ["episode", "checkpoint", "intervened_by"]


@admin.register(models.Event)
class EventAdmin(admin.ModelAdmin):
    list_display = ["episode", "seq", "type", "created_at"]
    list_filter = ["type"]
    raw_id_fields = ["episode"]


@admin.register(models.DatasetSnapshot)
class DatasetSnapshotAdmin(admin.ModelAdmin):
    list_display = ["id", "project", "kind", "rows", "sha256", "created_at"]
    list_filter = ["project", "kind"]

    def has_change_permission(self, request, obj=None):
        return False  # snapshots are immutable


@admin.register(models.TrainingRun)
class TrainingRunAdmin(admin.ModelAdmin):
    list_display = ["id", "project", "algorithm", "status", "progress", "created_at"]
    list_filter = ["project", "algorithm", "status"]


@admin.register(models.Evaluation)
class EvaluationAdmin(admin.ModelAdmin):
    list_display = ["id", "checkpoint", "cycle", "role", "split", "episodes", "success_rate", "mean_reward", "created_at"]
    list_filter = ["role"]
    raw_id_fields = ["checkpoint", "cycle"]


@admin.register(models.Cycle)
class CycleAdmin(admin.ModelAdmin):
    """Cycles change state only through flywheel/cycles.py; here they are read. Their schedule is the project's
    PeriodicTask ("flywheel cycle: project <id>") under Periodic tasks, editable there or on the Cycles page."""

    list_display = ["project", "iteration", "state", "trigger", "candidate", "decision", "started_at", "finished_at"]
    list_filter = ["project", "state", "trigger"]
    raw_id_fields = ["run", "candidate", "baseline", "deployment", "triggered_by"]
    readonly_fields = ["state", "config", "decision", "decision_data", "error", "log_tail", "timings", "progress",
                       "worker", "heartbeat_at", "started_at", "updated_at", "finished_at"]
