from django.contrib import admin

from rollouts import models


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
