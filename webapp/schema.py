"""OpenAPI security schemes for Loupe's two authentications (drf-spectacular cannot guess them)."""
from drf_spectacular.extensions import OpenApiAuthenticationExtension


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
