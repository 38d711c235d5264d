"""A probe that a sandboxed program runs (Debian's python3, standard library and python3-xlib only): it tries each of
Loupe's things the sandbox must keep it from, and writes what happened, one JSON object, to ``~/probe-<where>.json``.

``python3 probe.py WHERE`` reads its targets from ``~/probe-args.json``: ``{"files": [paths], "ports": {name: port},
"sockets": [unix socket paths], "displays": [names]}``. A value is "reached" when it got through, else the error. It
also does the task's own work: ``"own display"`` is "works" when its own X display (``$DISPLAY``, if set) answers.
"""
import json
import os
import socket
import sys


def _try(action):
    try:
        action()
        return "reached"
    except Exception as exc:  # noqa: BLE001 - any failure is a refusal; its text is the evidence
        return f"refused: {type(exc).__name__}: {exc}"[:200]


def _read(path):
    with open(path, "rb") as handle:
        handle.read(1)


def _connect(port):
    with socket.create_connection(("127.0.0.1", port), timeout=3):
        pass


def _unix(path):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(3)
        sock.connect(path)


def _display(name, cookie=True):
    from Xlib.display import Display

    saved = os.environ.pop("XAUTHORITY", None) if not cookie else None
    try:
        Display(name).close()
    finally:
        if saved is not None:
            os.environ["XAUTHORITY"] = saved


def main():
    where = sys.argv[1]
    home = os.path.expanduser("~")
    with open(os.path.join(home, "probe-args.json")) as handle:
        targets = json.load(handle)
    result = {}
    for path in targets.get("files", []):
        result[f"read {path}"] = _try(lambda path=path: _read(path))
    for name, port in targets.get("ports", {}).items():
        result[f"connect {name} ({port})"] = _try(lambda port=port: _connect(port))
    for path in targets.get("sockets", []):
        result[f"unix {path}"] = _try(lambda path=path: _unix(path))
    for name in targets.get("displays", []):
        result[f"display {name}"] = _try(lambda name=name: _display(name))
    if os.environ.get("DISPLAY"):
        own = _try(lambda: _display(os.environ["DISPLAY"]))
        result["own display"] = "works" if own == "reached" else own
    with open(os.path.join(home, f"probe-{where}.json"), "w") as out:
        json.dump(result, out)
    print(json.dumps(result))
    print("probe done")


if __name__ == "__main__":
    main()
