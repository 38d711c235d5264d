"""``python manage.py envservice --port 8200``: serve this host's envs over HTTP (see the README)."""
import signal

from django.core.management.base import BaseCommand, CommandError

from envservice.server import parse_pools, start, stop


class Command(BaseCommand):
    help = "Serve Loupe's environments over HTTP to RL engines (OpenAPI schema at /openapi.json)."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1", help="Address to listen on (0.0.0.0 for other hosts).")
        parser.add_argument("--port", type=int, default=8200)
        parser.add_argument("--pools", default="miniwob=1:8",
                            help="kind=warm:capacity per env kind, comma-separated (default miniwob=1:8).")
        parser.add_argument("--lease-timeout", type=float, default=120.0,
                            help="Seconds without a call after which a lease ends and its env goes back.")
        parser.add_argument("--step-timeout", type=float, default=60.0,
                            help="Seconds an env may take over one call before it counts as crashed.")

    def handle(self, *args, **opts):
        try:
            pools = parse_pools(opts["pools"])
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        server, service = start(host=opts["host"], port=opts["port"], pools=pools,
                                lease_timeout=opts["lease_timeout"], step_timeout=opts["step_timeout"])
        self.stdout.write(f"environment service on http://{opts['host']}:{opts['port']}/ "
                          f"(schema /openapi.json; pools {', '.join(f'{k} {v}' for k, v in pools.items())})")
        # a stop by SIGTERM (systemd, docker, the bench) ends as Ctrl-C does: leases end, the status report goes
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            stop(server, service)
