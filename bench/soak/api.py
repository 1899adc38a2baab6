"""A CI pipeline's view of the platform: the REST API with a team token.

Submissions carry an Idempotency-Key and are retried on connection errors, 5xx and 429
(after Retry-After), as a careful pipeline does; a retry must never create a second job.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request


class ApiError(Exception):
    def __init__(self, status: int, body: dict | str):
        super().__init__(f"HTTP {status}: {body}")
        self.status, self.body = status, body


class Api:
    def __init__(self, base_url: str, token: str, *, attempts: int = 8):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.attempts = attempts
        self.retries = 0

    def _call(self, method: str, path: str, body: dict | None = None, headers: dict | None = None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.base_url}{path}", data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": "application/json",
            "Accept": "application/json", **(headers or {}),
        })
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read().decode()
            return response.status, (json.loads(text) if text else {})

    def call(self, method: str, path: str, body: dict | None = None, headers: dict | None = None):
        """(status, json body); retries what a retry can fix, raises ``ApiError`` otherwise."""
        for attempt in range(self.attempts):
            try:
                return self._call(method, path, body, headers)
            except urllib.error.HTTPError as err:
                payload = err.read().decode()
                try:
                    payload = json.loads(payload)
                except ValueError:
                    pass
                if err.code == 429 or err.code >= 500:
                    self.retries += 1
                    time.sleep(float(err.headers.get("Retry-After") or 1 + attempt))
                    continue
                raise ApiError(err.code, payload) from None
            except OSError:  # connection refused or reset, timeout: the server may be restarting
                self.retries += 1
                time.sleep(1 + attempt)
        raise ApiError(0, f"no answer after {self.attempts} attempts")

    def submit(self, body: dict, key: str) -> tuple[int, dict]:
        return self.call("POST", "/api/v1/jobs", body, {"Idempotency-Key": key})

    def cancel(self, job_id: int) -> tuple[int, dict]:
        return self.call("POST", f"/api/v1/jobs/{job_id}/cancel")

    def job(self, job_id: int) -> dict:
        return self.call("GET", f"/api/v1/jobs/{job_id}")[1]
