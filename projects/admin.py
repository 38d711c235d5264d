from django.contrib import admin

from projects import models


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
