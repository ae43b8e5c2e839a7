"""A speech server for tests, on 127.0.0.1 only: the socket, threads and teardown every fake server shares."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Server(ThreadingHTTPServer):
    request_queue_size = 64  # 8 concurrent connects must not wait for a retry
    daemon_threads = True


class Loopback:
    """Serves ``handler`` on an OS-chosen port of 127.0.0.1 while entered. ``release`` is set on exit, so a handler
    that hangs on purpose (``release.wait``) ends with the test."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.release = threading.Event()
        self.httpd = _Server(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
