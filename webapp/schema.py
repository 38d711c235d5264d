"""OpenAPI security schemes for Loupe's two authentications (drf-spectacular cannot guess them), and records open to
more properties than they declare (core.api.OpenRecord)."""
from drf_spectacular.extensions import OpenApiAuthenticationExtension, OpenApiSerializerExtension


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "webapp.auth.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer",
                "description": "A token from POST /api/v1/auth/token; revoke it with DELETE /api/v1/auth/token."}


class SessionScheme(OpenApiAuthenticationExtension):
    target_class = "webapp.auth.SessionAuthentication"
    name = "cookieAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "cookie", "name": "sessionid",
                "description": "The browser's session (POST /api/v1/auth/session); writes need the X-CSRFToken header."}


class OpenRecordScheme(OpenApiSerializerExtension):
    target_class = "core.api.OpenRecord"
    match_subclasses = True

    def map_serializer(self, auto_schema, direction):
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        return {**schema, "additionalProperties": {}}
