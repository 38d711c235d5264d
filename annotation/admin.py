from django.contrib import admin

from annotation import models


@admin.register(models.Command)
class CommandAdmin(admin.ModelAdmin):
    list_display = ["id", "episode", "type", "user", "status", "created_at"]
    list_filter = ["type", "status"]
    raw_id_fields = ["episode"]


@admin.register(models.Intervention)
class InterventionAdmin(admin.ModelAdmin):
    list_display = ["id", "episode", "step_index", "kind", "user", "created_at"]
    list_filter = ["kind"]
    raw_id_fields = ["episode", "step", "command"]


@admin.register(models.AudioClip)
class AudioClipAdmin(admin.ModelAdmin):
    list_display = ["id", "episode", "user", "content_type", "committed_until", "finished", "created_at"]
    raw_id_fields = ["episode"]


@admin.register(models.AudioChunk)
class AudioChunkAdmin(admin.ModelAdmin):
    list_display = ["clip", "index", "start_time", "size", "created_at"]


@admin.register(models.TranscriptWord)
class TranscriptWordAdmin(admin.ModelAdmin):
    list_display = ["clip", "position", "word", "start", "end", "step"]
    raw_id_fields = ["clip", "step"]


@admin.register(models.Review)
class ReviewAdmin(admin.ModelAdmin):
    list_display = ["episode", "reviewer", "verdict", "grade", "updated_at"]
    list_filter = ["verdict"]
    raw_id_fields = ["episode"]
