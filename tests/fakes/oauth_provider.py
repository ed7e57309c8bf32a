"""A loopback OAuth2 authorization server (RFC 6749 §4.1, §6; RFC 7636 S256; RFC
7009 revocation) and an API that accepts its access tokens.

Written here, independently of authlib (which the code under test uses), so the
PKCE check is a second implementation: ``BASE64URL(SHA256(code_verifier))`` must equal
the ``code_challenge`` of the authorization request. The consent page has Approve
and Deny buttons (plain forms, so a browser test clicks them); a test can also
``approve``/``deny`` over HTTP.

- ``GET /authorize``: checks ``response_type=code``, the client, the registered
  redirect URI and an S256 challenge, then shows the consent page;
- ``POST /authorize``: Approve redirects with ``code`` and ``state``, Deny with
  ``error=access_denied`` and ``state``;
- ``POST /token``: client authenticated with HTTP Basic; ``authorization_code`` (the
  code single-use, the redirect URI and the verifier checked) or ``refresh_token``
  (rotated on each use: the old one stops working);
- ``POST /revoke``: forgets a token;
- ``GET /api/me``: 200 with the granted scopes for a live access token, else 401.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlencode, urlsplit


@dataclass
class _Grant:
    client_id: str
    redirect_uri: str
    scope: str
    challenge: str
    used: bool = False


@dataclass
class OAuthProvider:
    client_id: str = "flowpilot-client"
    client_secret: str = "cs-consent-5f6e7d8c9b"
    redirect_uris: list[str] = field(default_factory=list)  # empty: any http(s) one
    lifetime: int = 3600
    token_error: str = ""  # answer /token with this OAuth2 error
    codes: dict[str, _Grant] = field(default_factory=dict)
    access_tokens: dict[str, tuple[str, float]] = field(default_factory=dict)
    refresh_tokens: dict[str, str] = field(default_factory=dict)
    issued: list[str] = field(default_factory=list)  # every token and code handed out
    token_requests: list[dict[str, str]] = field(default_factory=list)
    revoked: list[str] = field(default_factory=list)
    api_calls: list[str] = field(default_factory=list)  # the Authorization headers seen
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    def start(self) -> OAuthProvider:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.daemon_threads = True
        server.provider = self  # type: ignore[attr-defined]
        self._server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _new(self, prefix: str) -> str:
        value = f"{prefix}-{secrets.token_urlsafe(18)}"
        self.issued.append(value)
        return value

    def expire_access_tokens(self) -> None:
        with self.lock:
            self.access_tokens = {k: (s, 0.0) for k, (s, _) in self.access_tokens.items()}


def s256(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


CONSENT_PAGE = """<!doctype html><html><head><title>Consent</title></head><body>
<h1 id="consent">{client} asks for: <span id="scope">{scope}</span></h1>
<form method="post" action="/authorize">
{hidden}
<button type="submit" name="decision" value="approve" id="approve">Approve</button>
<button type="submit" name="decision" value="deny" id="deny">Deny</button>
</form></body></html>"""


class _Handler(BaseHTTPRequestHandler):
    disable_nagle_algorithm = True  # headers and body go out at once, no 40 ms stalls

    def log_message(self, format: str, *args: object) -> None:
        pass

    @property
    def provider(self) -> OAuthProvider:
        return self.server.provider  # type: ignore[attr-defined]

    def _send(self, status: int, body: bytes, content_type: str, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, data: dict, **headers: str) -> None:
        self._send(status, json.dumps(data).encode(), "application/json", **headers)

    def _form(self) -> dict[str, str]:
        length = int(self.headers.get("Content-Length") or 0)
        return dict(parse_qsl(self.rfile.read(length).decode()))

    def _redirect(self, location: str) -> None:
        self._send(302, b"", "text/plain", Location=location)

    def _authorize_params(self, params: dict[str, str]) -> str | None:
        """What is wrong with an authorization request, or None."""
        p = self.provider
        if params.get("response_type") != "code":
            return "response_type must be code"
        if params.get("client_id") != p.client_id:
            return "unknown client_id"
        redirect = params.get("redirect_uri", "")
        if p.redirect_uris and redirect not in p.redirect_uris:
            return f"redirect_uri {redirect} is not registered"
        if not redirect.startswith(("http://", "https://")):
            return "redirect_uri must be an http(s) URL"
        if params.get("code_challenge_method") != "S256" or not params.get("code_challenge"):
            return "PKCE with S256 is required"
        if not params.get("state"):
            return "state is required"
        return None

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        params = dict(parse_qsl(parts.query))
        if parts.path == "/authorize":
            wrong = self._authorize_params(params)
            if wrong:
                self._send(400, wrong.encode(), "text/plain")
                return
            hidden = "\n".join(
                f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
                for k, v in params.items()
            )
            page = CONSENT_PAGE.format(
                client=html.escape(params["client_id"]),
                scope=html.escape(params.get("scope", "")),
                hidden=hidden,
            )
            self._send(200, page.encode(), "text/html; charset=utf-8")
        elif parts.path == "/api/me":
            self._api()
        else:
            self._send(404, b"not found", "text/plain")

    def _api(self) -> None:
        p = self.provider
        header = self.headers.get("Authorization", "")
        with p.lock:
            p.api_calls.append(header)
            found = p.access_tokens.get(header.removeprefix("Bearer "))
        if not header.startswith("Bearer ") or found is None or found[1] < time.time():
            self._json(401, {"error": "invalid_token"}, **{"WWW-Authenticate": "Bearer"})
            return
        self._json(200, {"user": "octo", "scope": found[0]})

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        if path == "/authorize":
            self._decide(self._form())
        elif path == "/token":
            self._token(self._form())
        elif path == "/revoke":
            form = self._form()
            if not self._client_ok(form):
                self._json(401, {"error": "invalid_client"})
                return
            with self.provider.lock:
                token = form.get("token", "")
                self.provider.revoked.append(token)
                self.provider.refresh_tokens.pop(token, None)
                self.provider.access_tokens.pop(token, None)
            self._send(200, b"", "text/plain")
        else:
            self._send(404, b"not found", "text/plain")

    def _decide(self, form: dict[str, str]) -> None:
        wrong = self._authorize_params(form)
        if wrong:
            self._send(400, wrong.encode(), "text/plain")
            return
        redirect, state = form["redirect_uri"], form["state"]
        sep = "&" if "?" in redirect else "?"
        if form.get("decision") != "approve":
            query = urlencode({"error": "access_denied", "state": state})
            self._redirect(f"{redirect}{sep}{query}")
            return
        p = self.provider
        with p.lock:
            code = p._new("code")
            p.codes[code] = _Grant(
                form["client_id"], redirect, form.get("scope", ""), form["code_challenge"]
            )
        self._redirect(f"{redirect}{sep}{urlencode({'code': code, 'state': state})}")

    def _client_ok(self, form: dict[str, str]) -> bool:
        p = self.provider
        header = self.headers.get("Authorization", "")
        if header.startswith("Basic "):
            user, _, password = base64.b64decode(header[6:]).decode().partition(":")
            return user == p.client_id and password == p.client_secret
        return False

    def _token(self, form: dict[str, str]) -> None:
        p = self.provider
        with p.lock:
            p.token_requests.append(form)
        if not self._client_ok(form):
            self._json(401, {"error": "invalid_client"}, **{"WWW-Authenticate": "Basic"})
            return
        if p.token_error:
            self._json(400, {"error": p.token_error, "error_description": "told to fail"})
            return
        grant_type = form.get("grant_type")
        with p.lock:
            if grant_type == "authorization_code":
                grant = p.codes.get(form.get("code", ""))
                if grant is None or grant.used:
                    self._json(400, {"error": "invalid_grant", "error_description": "bad code"})
                    return
                grant.used = True
                if form.get("redirect_uri") != grant.redirect_uri:
                    self._json(400, {"error": "invalid_grant", "error_description": "redirect"})
                    return
                if s256(form.get("code_verifier", "")) != grant.challenge:
                    self._json(
                        400, {"error": "invalid_grant", "error_description": "PKCE check failed"}
                    )
                    return
                scope = grant.scope
            elif grant_type == "refresh_token":
                found = p.refresh_tokens.pop(form.get("refresh_token", ""), None)
                if found is None:  # unknown, revoked or already rotated away
                    self._json(400, {"error": "invalid_grant", "error_description": "bad refresh"})
                    return
                scope = found.strip()
            else:
                self._json(400, {"error": "unsupported_grant_type"})
                return
            access, refresh = p._new("at"), p._new("rt")
            p.access_tokens[access] = (scope, time.time() + p.lifetime)
            p.refresh_tokens[refresh] = scope or " "
        self._json(
            200,
            {
                "access_token": access,
                "token_type": "Bearer",
                "expires_in": p.lifetime,
                "refresh_token": refresh,
                "scope": scope.strip(),
            },
        )
