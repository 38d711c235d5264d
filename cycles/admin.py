from django.contrib import admin

from cycles import models


@admin.register(models.Evaluation)
class EvaluationAdmin(admin.ModelAdmin):
    list_display = ["id", "checkpoint", "cycle", "role", "split", "episodes", "success_rate", "mean_reward", "created_at"]
    list_filter = ["role"]
    raw_id_fields = ["checkpoint", "cycle"]


@admin.register(models.Cycle)
class CycleAdmin(admin.ModelAdmin):
    """Cycles change state only through cycles/cycles.py; here they are read. Their schedule is the project's
    PeriodicTask ("flywheel cycle: project <id>") under Periodic tasks, editable there or on the Cycles page."""

    list_display = ["project", "iteration", "state", "trigger", "candidate", "decision", "started_at", "finished_at"]
    list_filter = ["project", "state", "trigger"]
    raw_id_fields = ["run", "candidate", "baseline", "deployment", "triggered_by"]
    readonly_fields = ["state", "config", "decision", "decision_data", "error", "log_tail", "timings", "progress",
                       "worker", "heartbeat_at", "started_at", "updated_at", "finished_at"]
