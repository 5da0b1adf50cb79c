"""A small fake of the GitHub REST API on 127.0.0.1, enough for PyGithub's sticky-comment calls.

Serves ``GET /user`` (403 for an installation token, as GitHub answers the Actions ``GITHUB_TOKEN``; the user
for a personal access token), ``GET /repos/o/r``, ``GET .../issues/n``, ``GET .../pulls/n``,
``GET .../issues/n/comments`` (paged with a ``Link`` header, honouring ``per_page`` up to 100),
``POST .../issues/n/comments`` (written by the token's identity) and ``PATCH/GET .../issues/comments/id``, under
an ``/api/v3`` prefix like GitHub Enterprise. It records every request and can be told to answer the next matching
requests with a failure (502, 403, a rate limit), optionally after performing them (a lost response), after a
delay (a timeout), after running an action (a comment deleted), or echoing the ``Authorization`` header.

Used in-process by the tests, and as a script by ``.ci/container-test.sh``::

    python tests/fake_github.py --port-file PORT --state STATE.json --repo o/r --pr 7 [--forbid-writes]
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

PREFIX = "/api/v3"


@dataclass
class Failure:
    """Answer the next ``times`` requests matching ``method`` and ``path`` (regex) with this response."""

    method: str
    path: str
    status: int
    body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    times: int = 1
    perform: bool = False
    """Perform the request first, then answer with the failure (a lost response)."""
    delay: float = 0.0
    """Seconds to wait before answering (longer than the client's timeout: a read timeout)."""
    action: Callable[[FakeGithub], None] | None = None
    """Run on the server's state before the request is handled (e.g. delete a comment)."""
    echo_authorization: bool = False
    """Quote the request's ``Authorization`` header in the answer, as some proxies do."""


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    status: int
    authorization: str | None


DEFAULT_TOKEN = "ghs_t0ken"
"""The token a :class:`FakeGithub` accepts unless given another."""


class FakeGithub:
    """State and behaviour of the fake server (thread-safe)."""

    def __init__(
        self,
        repo: str = "octo/rag",
        pr: int = 7,
        token: str = DEFAULT_TOKEN,
        state_file: Path | None = None,
        host: str = "127.0.0.1",
        user_login: str | None = None,
    ):
        self.host = host
        self.user_login = user_login
        """Login of the token's user (a personal access token); None: an installation token (``GITHUB_TOKEN``)."""
        self.repo = repo
        self.pr = pr
        self.token = token
        self.state_file = state_file
        self.comments: list[dict[str, Any]] = []
        self.requests: list[Recorded] = []
        self.failures: list[Failure] = []
        self._next_id = 1000
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self, port: int = 0) -> FakeGithub:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer((self.host, port), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.server_address[1]

    @property
    def root(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def api_url(self) -> str:
        return self.root + PREFIX

    # ------------------------------------------------------------------ helpers for tests
    def add_comment(self, body: str, login: str = "someone") -> dict[str, Any]:
        with self._lock:
            return self._new_comment(body, login)

    def fail(self, method: str, path: str, status: int, times: int = 1, **kwargs: Any) -> None:
        self.failures.append(Failure(method, path, status, times=times, **kwargs))

    def calls(self, method: str, pattern: str = "") -> list[Recorded]:
        return [r for r in self.requests if r.method == method and re.search(pattern, r.path)]

    # ------------------------------------------------------------------ internals
    def _new_comment(self, body: str, login: str) -> dict[str, Any]:
        self._next_id += 1
        cid = self._next_id
        api = f"{self.api_url}/repos/{self.repo}"
        comment = {
            "id": cid,
            "node_id": f"IC_{cid}",
            "url": f"{api}/issues/comments/{cid}",
            "html_url": f"{self.root}/{self.repo}/pull/{self.pr}#issuecomment-{cid}",
            "issue_url": f"{api}/issues/{self.pr}",
            "body": body,
            "user": {"login": login, "id": 1, "type": "Bot" if login.endswith("[bot]") else "User"},
            "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z",
        }
        self.comments.append(comment)
        self._save()
        return comment

    def _save(self) -> None:
        if self.state_file is not None:
            tmp = self.state_file.with_suffix(".tmp")
            requests = [[r.method, r.path, r.status] for r in self.requests]
            tmp.write_text(json.dumps({"comments": self.comments, "requests": requests}, indent=1))
            tmp.replace(self.state_file)

    def _repo_json(self) -> dict[str, Any]:
        owner, name = self.repo.split("/")
        return {
            "id": 1,
            "name": name,
            "full_name": self.repo,
            "owner": {"login": owner, "id": 2},
            "url": f"{self.api_url}/repos/{self.repo}",
            "html_url": f"{self.root}/{self.repo}",
        }

    def _issue_json(self) -> dict[str, Any]:
        api = f"{self.api_url}/repos/{self.repo}"
        return {
            "id": 3,
            "number": self.pr,
            "url": f"{api}/issues/{self.pr}",
            "comments_url": f"{api}/issues/{self.pr}/comments",
            "html_url": f"{self.root}/{self.repo}/pull/{self.pr}",
            "repository_url": api,
            "title": "PR",
            "state": "open",
            "comments": len(self.comments),
            "pull_request": {"url": f"{api}/pulls/{self.pr}"},
        }

    @property
    def identity(self) -> str:
        """Who the token's comments are written by."""
        return self.user_login or "github-actions[bot]"

    def handle(self, method: str, raw_path: str, body: Any, authorization: str | None) -> tuple[int, Any, dict, float]:
        parts = urlsplit(raw_path)
        path, query = parts.path, parse_qs(parts.query)
        with self._lock:
            failure = next(
                (f for f in self.failures if f.times > 0 and f.method == method and re.search(f.path, path)), None
            )
            if failure is not None:
                failure.times -= 1
                if failure.action is not None:
                    failure.action(self)
            if failure is None or failure.perform:
                status, payload, headers = self._route(method, path, query, body, authorization)
            if failure is not None:
                status, headers = failure.status, failure.headers
                payload = dict(failure.body or {"message": "injected failure"})
                if failure.echo_authorization:
                    payload["request_headers"] = {"Authorization": authorization}
            self.requests.append(Recorded(method, path, query, body, status, authorization))
            self._save()
        return status, payload, headers, failure.delay if failure is not None else 0.0

    def _route(self, method: str, path: str, query: dict, body: Any, authorization: str | None):
        if authorization not in (f"token {self.token}", f"Bearer {self.token}"):
            return 401, {"message": "Bad credentials"}, {}
        if not path.startswith(PREFIX):
            return 404, {"message": "Not Found"}, {}
        path = path[len(PREFIX) :]
        if method == "GET" and path == "/user":
            if self.user_login is None:
                return 403, {"message": "Resource not accessible by integration"}, {}
            return 200, {"login": self.user_login, "id": 5, "type": "User", "url": f"{self.api_url}/user"}, {}
        repo = f"/repos/{self.repo}"
        if method == "GET" and path == repo:
            return 200, self._repo_json(), {}
        if method == "GET" and path in (f"{repo}/issues/{self.pr}", f"{repo}/pulls/{self.pr}"):
            return 200, self._issue_json(), {}
        if path == f"{repo}/issues/{self.pr}/comments":
            if method == "POST":
                return 201, self._new_comment(body["body"], self.identity), {}
            if method == "GET":
                return self._page(path, query)
        match = re.fullmatch(rf"{repo}/issues/comments/(\d+)", path)
        if match:
            found = [c for c in self.comments if c["id"] == int(match.group(1))]
            if not found:
                return 404, {"message": "Not Found"}, {}
            if method == "PATCH":
                found[0]["body"] = body["body"]
                found[0]["updated_at"] = "2026-01-02T00:00:00Z"
                self._save()
            return 200, found[0], {}
        return 404, {"message": "Not Found", "path": path}, {}

    def _page(self, path: str, query: dict) -> tuple[int, Any, dict]:
        per_page = min(int(query.get("per_page", ["30"])[0]), 100)
        page = int(query.get("page", ["1"])[0])
        items = self.comments[(page - 1) * per_page : page * per_page]
        last = max(1, -(-len(self.comments) // per_page))
        links = []
        url = f"{self.api_url}{path}"
        if page < last:
            links.append(f'<{url}?per_page={per_page}&page={page + 1}>; rel="next"')
            links.append(f'<{url}?per_page={per_page}&page={last}>; rel="last"')
        return 200, items, ({"Link": ", ".join(links)} if links else {})


class _Handler(BaseHTTPRequestHandler):
    fake: FakeGithub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # silence the default stderr log
        pass

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        status, payload, headers, delay = self.fake.handle(
            self.command, self.path, body, self.headers.get("Authorization")
        )
        time.sleep(delay)
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = do_DELETE = _serve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port-file", type=Path, required=True)
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--repo", default="octo/rag")
    parser.add_argument("--pr", type=int, default=7)
    parser.add_argument("--token", default="ghs_t0ken")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind and to put in returned URLs")
    parser.add_argument("--forbid-writes", action="store_true", help="answer 403 to comment writes (fork token)")
    args = parser.parse_args()
    fake = FakeGithub(args.repo, args.pr, args.token, state_file=args.state, host=args.host)
    if args.forbid_writes:
        for method in ("POST", "PATCH"):
            fake.fail(method, "/comments", 403, body={"message": "Resource not accessible by integration"}, times=10**9)
    fake._save()
    fake.start()
    args.port_file.write_text(str(fake.port))
    threading.Event().wait()


if __name__ == "__main__":
    main()
