"""Serve the shop on a free loopback port: ``python serve.py`` (the site's venv, SHOP_DB / SHOP_DATA set).

Prints ``LISTENING <port>`` once the database answered, so the env that started it knows where it
is and that it works; a database that cannot be read ends the process with the reason on stderr.
The server exits by itself when the process that started it is gone (no stray servers).
"""
import os
import socket
import sys
import threading
import time


def _exit_with_parent(parent: int) -> None:
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(0)


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shopsite.settings")
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    from django.core.wsgi import get_wsgi_application
    from django.db import connection

    application = get_wsgi_application()
    db = connection.settings_dict["NAME"]
    if not os.path.isfile(db):
        sys.exit(f"the shop's database {db} does not exist")
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM catalogue_product")
            (products,) = cursor.fetchone()
    except Exception as exc:  # noqa: BLE001 - any failure here means the site cannot serve
        sys.exit(f"the shop's database {db} cannot be read: {exc}")
    finally:
        connection.close()
    if not products:
        sys.exit(f"the shop's database {db} has no products; build the site again (make sites)")

    from waitress import serve

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", int(os.environ.get("SHOP_PORT", "0"))))
    sock.listen(1024)  # before the line below: a client may connect as soon as it reads it
    print(f"LISTENING {sock.getsockname()[1]}", flush=True)
    serve(application, sockets=[sock], threads=int(os.environ.get("SHOP_THREADS", "4")), ident="loupe-shop",
          _quiet=True)


if __name__ == "__main__":
    main()
