"""The process that holds a sandbox's namespaces, and makes sockets inside its network namespace for the env.

Run by ``Sandbox.start`` inside bubblewrap (no arguments, stdin a Unix socket to the env, stdout where it says
``ready``): it imports nothing of Loupe's. A request is one line, ``listen PORT`` or ``connect PORT TIMEOUT`` (a TCP port on 127.0.0.1, the sandbox's own
loopback); the answer is ``ok`` with the socket's descriptor attached, or ``error <reason>``. It exits when the env
closes its end (the env, or the worker, ended), and the sandbox's pid namespace, and every process in it, with it.
"""

import socket
import sys


def main() -> None:
    control = socket.socket(fileno=sys.stdin.fileno())
    print("ready", flush=True)  # the sandbox is made: the env may enter it
    buffer = b""
    while True:
        chunk = control.recv(4096)
        if not chunk:
            return
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            parts = line.decode().split()
            made = None
            try:
                if parts[:1] == ["listen"]:
                    made = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    made.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    made.bind(("127.0.0.1", int(parts[1])))
                    made.listen(128)
                elif parts[:1] == ["connect"]:
                    made = socket.create_connection(("127.0.0.1", int(parts[1])), timeout=float(parts[2]))
                else:
                    raise ValueError(f"unknown request {line[:40]!r}")
                socket.send_fds(control, [b"ok"], [made.fileno()])
            except (OSError, ValueError, IndexError) as exc:
                control.sendall(f"error {exc}".encode()[:1000])
            finally:
                if made is not None:
                    made.close()


if __name__ == "__main__":
    main()
