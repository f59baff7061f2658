"""A TLS and basic-auth front for the local schema registry (whose server has neither).

``RegistryGate(backend_port, users=..., tls_dir=...)`` listens on a free loopback port,
serves HTTPS with a throwaway CA's certificate when ``tls_dir`` is given, answers 401 to a
request without one of ``users``' ``Authorization: Basic`` credentials, and passes every
other request to the registry on ``backend_port`` as it came (method, path, body), its
answer back as it went: what a client of a secured Confluent registry goes through.
"""

from __future__ import annotations

import base64
import http.client
import http.server
import ssl
import threading
from collections.abc import Mapping
from pathlib import Path

_FORWARDED_HEADERS = ("Content-Type", "Accept")


class RegistryGate:
    """A reverse proxy that checks credentials (and speaks TLS) before the registry."""

    def __init__(
        self,
        backend_port: int,
        *,
        users: Mapping[str, str] | None = None,
        tls_dir: Path | None = None,
    ) -> None:
        self.backend_port = backend_port
        self.users = dict(users or {})
        self.ca_path: Path | None = None
        gate = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                if gate.users and not gate.allowed(self.headers.get("Authorization")):
                    refusal = b'{"error_code":401,"message":"Unauthorized"}'
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="schema-registry"')
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(refusal)))
                    self.end_headers()
                    self.wfile.write(refusal)
                    return
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {h: v for h in _FORWARDED_HEADERS if (v := self.headers.get(h))}
                backend = http.client.HTTPConnection("127.0.0.1", gate.backend_port, timeout=60)
                try:
                    backend.request(self.command, self.path, body=body, headers=headers)
                    answer = backend.getresponse()
                    payload = answer.read()
                finally:
                    backend.close()
                self.send_response(answer.status)
                self.send_header(
                    "Content-Type", answer.getheader("Content-Type") or "application/json"
                )
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = _handle

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        if tls_dir is not None:
            # cryptography (certificate generation) loads only for a TLS gate
            from streaming.testing.tls import write_server_tls

            tls = write_server_tls(tls_dir)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(tls.keystore_path)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
            self.ca_path = tls.ca_path
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="registry-gate", daemon=True
        )
        self._thread.start()

    @property
    def scheme(self) -> str:
        """``https`` with TLS, else ``http``."""
        return "https" if self.ca_path is not None else "http"

    def allowed(self, authorization: str | None) -> bool:
        """Whether an ``Authorization`` header names one of the users with its password."""
        if not authorization or not authorization.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(authorization[6:]).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        return user in self.users and self.users[user] == password

    def close(self) -> None:
        """Stop listening."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
