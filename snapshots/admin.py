from django.contrib import admin

from snapshots import models


@admin.register(models.DatasetSnapshot)
class DatasetSnapshotAdmin(admin.ModelAdmin):
    list_display = ["id", "project", "kind", "rows", "sha256", "created_at"]
    list_filter = ["project", "kind"]

    def has_change_permission(self, request, obj=None):
        return False  # snapshots are immutable
