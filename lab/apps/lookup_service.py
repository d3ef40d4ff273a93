"""The external service of "It's ok to do external lookups" ("Tales from running Kafka Streams in Production"): an
HTTP server on 127.0.0.1 that
answers every GET after `latency_ms`, and counts the calls.

    with LookupService(latency_ms=50) as service:
        service.url        # http://127.0.0.1:PORT/lookup
        service.calls      # requests answered so far
"""
from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LookupService:
    def __init__(self, latency_ms: float):
        self.latency_s = latency_ms / 1000
        self.calls = 0
        self._lock = threading.Lock()
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                time.sleep(service.latency_s)   # the latency the lesson is about
                with service._lock:
                    service.calls += 1
                body = b"{}"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):   # quiet: no line per request
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/lookup"
        self._thread = threading.Thread(target=self.server.serve_forever, name="lookup-service", daemon=True)

    def __enter__(self) -> "LookupService":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
