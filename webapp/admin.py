from django.contrib import admin

from webapp.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["user", "prefix", "name", "created_at", "expires_at", "revoked_at", "last_used_at"]
    readonly_fields = ["digest", "prefix"]
