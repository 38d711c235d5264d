"""ASGI entry point: HTTP through Django, WebSockets through Channels with authentication and origin checks."""
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402

from annotation.consumers import EpisodeConsumer  # noqa: E402
from webapp.middleware import WebSocketDatabaseUnavailable  # noqa: E402
from webapp.ws_auth import WebSocketAuthStack  # noqa: E402

websocket_urlpatterns = [path("ws/episodes/<int:episode_id>/", EpisodeConsumer.as_asgi())]

application = ProtocolTypeRouter({
    "http": django_asgi_app,
    "websocket": WebSocketDatabaseUnavailable(WebSocketAuthStack(URLRouter(websocket_urlpatterns))),
})
