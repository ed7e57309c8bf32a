"""A loopback OAuth2 authorization server and API that count token requests and rotate
refresh tokens, for the shared-refresh tests (tests/tools/http/test_shared_token.py and
tests/tools/credentials/test_refresh_workers.py).

``POST /token``: the client in HTTP Basic (``client_id`` / ``secret``). The
``refresh_token`` grant accepts only the current refresh token and rotates it (``rt-N``);
a spent one answers 400 ``invalid_grant``. The ``client_credentials`` grant issues a
token too. Each answer is sent after ``delay`` seconds (a slow provider widens the race).
``GET /api/{tag}``: 200 for the newest access token, 401 with
``WWW-Authenticate: Bearer error="invalid_token"`` for any other.
"""

from __future__ import annotations

import base64
import threading
import time
from urllib.parse import parse_qsl

from tests.fakes.http import FakeAPI, FakeResponse, RecordedRequest


class OAuthServer(FakeAPI):
    def __init__(
        self, *, client_id: str = "app-7", secret: str = "cs-5f4e3d2c", delay: float = 0.0
    ) -> None:
        super().__init__()
        self.client_id, self.secret, self.delay = client_id, secret, delay
        self.refresh_token = "rt-0-initial"
        self.access_token = ""
        self.grants: list[dict[str, str]] = []
        self.api_calls: list[str] = []
        self._state = threading.Lock()
        self.route("token", "POST", r"/token", self._token)
        self.route("api", "GET", r"/api/(?P<tag>[^/]+)", self._api)

    @property
    def token_url(self) -> str:
        return f"{self.url}/token"

    def _token(self, request: RecordedRequest, match: object) -> FakeResponse:
        time.sleep(self.delay)
        basic = (request.headers.get("authorization") or "")[6:]
        client, _, secret = base64.b64decode(basic).decode().partition(":")
        form = dict(parse_qsl(request.body.decode()))
        with self._state:
            self.grants.append({"client": client, **form})
            if (client, secret) != (self.client_id, self.secret):
                return FakeResponse.json({"error": "invalid_client"}, 401)
            if form.get("grant_type") == "refresh_token":
                if form.get("refresh_token") != self.refresh_token:
                    return FakeResponse.json({"error": "invalid_grant"}, 400)
                self.refresh_token = f"rt-{len(self.grants)}-rotated"
            self.access_token = f"at-{len(self.grants)}-issued"
            answer = {"access_token": self.access_token, "expires_in": 3600}
            if form.get("grant_type") == "refresh_token":
                answer["refresh_token"] = self.refresh_token
            return FakeResponse.json(answer)

    def _api(self, request: RecordedRequest, match: object) -> FakeResponse:
        token = (request.headers.get("authorization") or "")[7:]
        with self._state:
            self.api_calls.append(token)
            current = self.access_token
        if token and token == current:
            return FakeResponse.json({"ok": True})
        challenge = 'Bearer error="invalid_token", error_description="expired"'
        return FakeResponse.json({"error": "invalid_token"}, 401, {"WWW-Authenticate": challenge})

    def revoke_access(self) -> None:
        """The provider expires the access token early: the API refuses it from now."""
        with self._state:
            self.access_token = ""
