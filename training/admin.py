from django.contrib import admin

from training import models


@admin.register(models.TrainingRun)
class TrainingRunAdmin(admin.ModelAdmin):
    list_display = ["id", "project", "algorithm", "status", "progress", "created_at"]
    list_filter = ["project", "algorithm", "status"]
