"""Runs inside a desktop's sandbox (its network namespace holds the browser): speaks the Chrome DevTools protocol
to the session's Chromium, started with --remote-debugging-port (OSWorld's tasks use 1337, and 9222 through socat).

Usage: chrome_helper.py COMMAND JSON. Prints one JSON answer. Commands: ``tabs`` (the page targets, most recently
used first), ``open`` (urls), ``close`` (urls), ``evaluate`` (expression, on the active tab or a new one at ``url``).
The DevTools HTTP endpoints need nothing but the standard library; ``evaluate`` needs websocket-client (the
desktop's python3, ``make env-tools``).
"""
import json
import sys
import time
import urllib.request
from urllib.parse import quote

PORTS = (9222, 1337)


def http(path, method="GET", timeout=5.0):
    last = None
    for port in PORTS:
        try:
            request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                body = answer.read().decode()
            try:
                return json.loads(body or "null")
            except ValueError:  # /json/close answers "Target is closing"
                return body
        except OSError as exc:
            last = exc
    raise SystemExit(f"no browser answers on 127.0.0.1:{PORTS} (the DevTools port): {last}")


def tabs():
    return [t for t in http("/json/list") if t.get("type") == "page"]


def same_url(first, second):
    """OSWorld's comparison: scheme, "www." and a trailing slash aside."""
    def norm(url):
        return url.split("://", 1)[-1].replace("www.", "", 1).rstrip("/").lower()
    return norm(first) == norm(second)


def wait_for_browser(seconds):
    deadline = time.monotonic() + seconds
    while True:
        try:
            return tabs()
        except SystemExit:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def evaluate(target, expression, timeout=10.0):
    import websocket  # websocket-client

    ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=timeout, suppress_origin=True)
    try:
        ws.send(json.dumps({"id": 1, "method": "Runtime.evaluate",
                            "params": {"expression": expression, "returnByValue": True, "awaitPromise": True}}))
        while True:
            message = json.loads(ws.recv())
            if message.get("id") == 1:
                return message.get("result", {}).get("result", {}).get("value")
    finally:
        ws.close()


def main():
    command, args = sys.argv[1], json.loads(sys.argv[2] if len(sys.argv) > 2 else "{}")
    if command == "tabs":
        out = wait_for_browser(args.get("wait", 0))
    elif command == "open":
        before = wait_for_browser(args.get("wait", 20))
        for url in args["urls"]:
            http(f"/json/new?{quote(url, safe='')}", method="PUT")
        if before and args["urls"]:  # OSWorld closes the default tab once the first one is open
            http(f"/json/close/{before[-1]['id']}")
        out = [t["url"] for t in tabs()]
    elif command == "close":
        for url in args["urls"]:
            for target in tabs():
                if same_url(target["url"], url):
                    http(f"/json/close/{target['id']}")
                    break
        out = [t["url"] for t in tabs()]
    elif command == "evaluate":
        if args.get("url"):
            target = http(f"/json/new?{quote(args['url'], safe='')}", method="PUT")
            deadline = time.monotonic() + args.get("wait", 10)
            while time.monotonic() < deadline and evaluate(target, "document.readyState") != "complete":
                time.sleep(0.2)
        else:
            found = tabs()
            if not found:
                raise SystemExit("the browser has no tab")
            target = found[0]
        out = {"url": evaluate(target, "location.href"), "value": evaluate(target, args["expression"])}
    else:
        raise SystemExit(f"unknown command {command!r}")
    sys.stdout.write(json.dumps(out))


if __name__ == "__main__":
    main()
