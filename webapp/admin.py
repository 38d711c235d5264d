from django.contrib import admin

from webapp.models import ApiToken, AuditEntry


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["user", "prefix", "name", "created_at", "expires_at", "revoked_at", "last_used_at"]
    readonly_fields = ["digest", "prefix"]


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    list_display = ["at", "actor", "action", "target", "project_id"]
    list_filter = ["action"]

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
