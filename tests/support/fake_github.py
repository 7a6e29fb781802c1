"""A local fake of the GitHub REST API: only the endpoints prompt-gate's Action calls, on
127.0.0.1, in a thread. PyGithub talks to it over HTTP through its base URL.

Endpoints: GET /user (403 for an installation token such as the workflow's GITHUB_TOKEN,
like GitHub; the user of a personal token when ``token_login`` is set); GET repo; GET pull;
GET pull files (paginated with Link headers, like GitHub);
GET issue; GET/POST issue comments; PATCH issue comment; POST commit status; GET commit
(with its files); POST commit comment; GET compare. Every call is recorded in ``calls``.
Bodies over 65,536 characters are refused with 422, as GitHub does.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

BODY_LIMIT = 65536


@dataclass
class Call:
    method: str
    path: str
    query: dict
    body: dict | None


@dataclass
class FakeRepo:
    full_name: str
    default_branch: str = "main"
    pulls: dict = field(default_factory=dict)  # number -> {"head": sha, "user": login, "files": [...]}
    issue_comments: dict = field(default_factory=dict)  # id -> {"issue": n, "body": str, "user": login}
    statuses: list = field(default_factory=list)  # {"sha", "state", "description", "context", "target_url"}
    commit_comments: list = field(default_factory=list)  # {"sha", "body"}
    commits: dict = field(default_factory=dict)  # sha -> [files]
    compares: dict = field(default_factory=dict)  # (base, head) -> [files]
    compare_commits: dict = field(default_factory=dict)  # (base, head) -> [sha]


def file_entry(path: str, status: str = "modified", previous: str | None = None) -> dict:
    entry = {"sha": "0" * 40, "filename": path, "status": status, "additions": 1, "deletions": 0, "changes": 1}
    if previous:
        entry["previous_filename"] = previous
    return entry


class FakeGitHub:
    """``with FakeGitHub("acme/prompts") as gh: gh.base_url``."""

    def __init__(
        self,
        repository: str = "acme/prompts",
        token: str = "test-token",
        default_branch: str = "main",
        bot_login: str = "github-actions[bot]",
        token_login: str | None = None,
    ):
        self.repo = FakeRepo(repository, default_branch)
        self.token = token
        self.bot_login = bot_login
        self.token_login = token_login
        self.calls: list[Call] = []
        self._ids = itertools.count(1000)
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _handle(self, method):
                fake._dispatch(self, method)

            def do_GET(self):
                self._handle("GET")

            def do_POST(self):
                self._handle("POST")

            def do_PATCH(self):
                self._handle("PATCH")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    # --- lifecycle -------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeGitHub:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # --- setup -----------------------------------------------------------------------------------

    def add_pull(self, number: int, head_sha: str, files, author: str = "octocat") -> None:
        self.repo.pulls[number] = {
            "head": head_sha,
            "user": author,
            "files": [f if isinstance(f, dict) else file_entry(f) for f in files],
        }

    def add_commit(self, sha: str, files) -> None:
        self.repo.commits[sha] = [f if isinstance(f, dict) else file_entry(f) for f in files]

    def add_compare(self, base: str, head: str, files, commits=()) -> None:
        self.repo.compares[(base, head)] = [f if isinstance(f, dict) else file_entry(f) for f in files]
        self.repo.compare_commits[(base, head)] = list(commits)

    def add_issue_comment(self, number: int, body: str, user: str = "someone") -> int:
        cid = next(self._ids)
        self.repo.issue_comments[cid] = {"issue": number, "body": body, "user": user}
        return cid

    # --- queries for tests -------------------------------------------------------------------------

    def comments_on(self, number: int) -> list[dict]:
        return [{"id": cid, **c} for cid, c in sorted(self.repo.issue_comments.items()) if c["issue"] == number]

    def calls_to(self, method: str, pattern: str) -> list[Call]:
        return [c for c in self.calls if c.method == method and re.search(pattern, c.path)]

    # --- JSON shapes -------------------------------------------------------------------------------

    def _repo_url(self) -> str:
        return f"{self.base_url}/repos/{self.repo.full_name}"

    def _user(self, login: str) -> dict:
        return {
            "login": login,
            "id": abs(hash(login)) % 10**6,
            "type": "Bot" if "[bot]" in login else "User",
            "url": f"{self.base_url}/users/{login}",
        }

    def _repo_json(self) -> dict:
        owner = self.repo.full_name.split("/")[0]
        return {
            "id": 1,
            "name": self.repo.full_name.split("/")[1],
            "full_name": self.repo.full_name,
            "default_branch": self.repo.default_branch,
            "owner": self._user(owner),
            "url": self._repo_url(),
            "private": False,
        }

    def _pull_json(self, number: int) -> dict:
        pr = self.repo.pulls[number]
        return {
            "id": number,
            "number": number,
            "state": "open",
            "url": f"{self._repo_url()}/pulls/{number}",
            "issue_url": f"{self._repo_url()}/issues/{number}",
            "user": self._user(pr["user"]),
            "head": {"sha": pr["head"], "ref": f"feature-{number}", "repo": self._repo_json()},
            "base": {"sha": "b" * 40, "ref": self.repo.default_branch, "repo": self._repo_json()},
        }

    def _comment_json(self, cid: int) -> dict:
        c = self.repo.issue_comments[cid]
        return {
            "id": cid,
            "body": c["body"],
            "user": self._user(c["user"]),
            "url": f"{self._repo_url()}/issues/comments/{cid}",
            "html_url": f"https://github.example/{self.repo.full_name}/issues/{c['issue']}#issuecomment-{cid}",
            "issue_url": f"{self._repo_url()}/issues/{c['issue']}",
            "created_at": "2024-01-01T00:00:00Z",
            "updated_at": "2024-01-01T00:00:00Z",
        }

    # --- dispatch ----------------------------------------------------------------------------------

    def _dispatch(self, h: BaseHTTPRequestHandler, method: str) -> None:
        parts = urlsplit(h.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        with self._lock:
            self.calls.append(Call(method, parts.path, query, body))
        auth = h.headers.get("Authorization", "")
        if auth not in (f"token {self.token}", f"Bearer {self.token}"):
            return self._send(h, 401, {"message": "Bad credentials"})
        prefix = f"/repos/{self.repo.full_name}"
        path = parts.path
        if path == "/user" and method == "GET":
            if self.token_login is None:
                return self._send(h, 403, {"message": "Resource not accessible by integration"})
            return self._send(h, 200, self._user(self.token_login))
        if not path.startswith(prefix):
            return self._send(h, 404, {"message": "Not Found"})
        rest = path[len(prefix) :]
        with self._lock:
            status, payload, headers = self._route(method, rest, query, body)
        self._send(h, status, payload, headers)

    def _route(self, method, rest, query, body):
        r = self.repo
        if method == "GET" and rest == "":
            return 200, self._repo_json(), {}
        m = re.fullmatch(r"/pulls/(\d+)", rest)
        if m and method == "GET":
            n = int(m.group(1))
            return (200, self._pull_json(n), {}) if n in r.pulls else (404, {"message": "Not Found"}, {})
        m = re.fullmatch(r"/pulls/(\d+)/files", rest)
        if m and method == "GET":
            n = int(m.group(1))
            if n not in r.pulls:
                return 404, {"message": "Not Found"}, {}
            return self._page(f"/repos/{r.full_name}/pulls/{n}/files", r.pulls[n]["files"], query, cap=3000)
        m = re.fullmatch(r"/issues/(\d+)", rest)
        if m and method == "GET":
            n = int(m.group(1))
            return 200, {"number": n, "url": f"{self._repo_url()}/issues/{n}", "title": f"PR {n}"}, {}
        m = re.fullmatch(r"/issues/(\d+)/comments", rest)
        if m:
            n = int(m.group(1))
            if method == "GET":
                items = [self._comment_json(cid) for cid, c in sorted(r.issue_comments.items()) if c["issue"] == n]
                return self._page(f"/repos/{r.full_name}/issues/{n}/comments", items, query)
            if method == "POST":
                text = (body or {}).get("body", "")
                if len(text) > BODY_LIMIT:
                    return 422, {"message": "Validation Failed", "errors": [{"message": "body is too long"}]}, {}
                cid = next(self._ids)
                r.issue_comments[cid] = {"issue": n, "body": text, "user": self.token_login or self.bot_login}
                return 201, self._comment_json(cid), {}
        m = re.fullmatch(r"/issues/comments/(\d+)", rest)
        if m and method == "PATCH":
            cid = int(m.group(1))
            if cid not in r.issue_comments:
                return 404, {"message": "Not Found"}, {}
            text = (body or {}).get("body", "")
            if len(text) > BODY_LIMIT:
                return 422, {"message": "Validation Failed", "errors": [{"message": "body is too long"}]}, {}
            r.issue_comments[cid]["body"] = text
            return 200, self._comment_json(cid), {}
        m = re.fullmatch(r"/statuses/([0-9a-f]+)", rest)
        if m and method == "POST":
            entry = {"sha": m.group(1), **(body or {})}
            if entry.get("state") not in ("pending", "success", "failure", "error"):
                return 422, {"message": "Validation Failed"}, {}
            if len(entry.get("description") or "") > 140:
                return 422, {"message": "description is too long (maximum is 140 characters)"}, {}
            r.statuses.append(entry)
            return 201, {"id": len(r.statuses), "url": f"{self._repo_url()}/statuses/{m.group(1)}", **entry}, {}
        m = re.fullmatch(r"/commits/([0-9a-f]+)/comments", rest)
        if m and method == "POST":
            text = (body or {}).get("body", "")
            if len(text) > BODY_LIMIT:
                return 422, {"message": "Validation Failed"}, {}
            r.commit_comments.append({"sha": m.group(1), "body": text})
            cid = next(self._ids)
            return (
                201,
                {"id": cid, "body": text, "commit_id": m.group(1), "url": f"{self._repo_url()}/comments/{cid}"},
                {},
            )
        m = re.fullmatch(r"/commits/([0-9a-f]+)", rest)
        if m and method == "GET":
            sha = m.group(1)
            if sha not in r.commits:
                return 404, {"message": "No commit found"}, {}
            files = r.commits[sha]
            per_page = int(query.get("per_page", 300))
            page = int(query.get("page", 1))
            chunk = files[(page - 1) * per_page : page * per_page]
            headers = {}
            if page * per_page < len(files):
                headers["Link"] = (
                    f"<{self.base_url}/repos/{r.full_name}/commits/{sha}?page={page + 1}"
                    f'&per_page={per_page}>; rel="next"'
                )
            return (
                200,
                {
                    "sha": sha,
                    "url": f"{self._repo_url()}/commits/{sha}",
                    "files": chunk,
                    "commit": {"message": "change"},
                    "parents": [],
                },
                headers,
            )
        m = re.fullmatch(r"/compare/([0-9a-f]+)\.\.\.([0-9a-f]+)", rest)
        if m and method == "GET":
            key = (m.group(1), m.group(2))
            if key not in r.compares:
                return 404, {"message": "Not Found"}, {}
            return (
                200,
                {
                    "url": f"{self._repo_url()}/compare/{key[0]}...{key[1]}",
                    "status": "ahead",
                    "ahead_by": 1,
                    "behind_by": 0,
                    "total_commits": 1,
                    "files": r.compares[key][:300],
                    "commits": [
                        {"sha": c, "url": f"{self._repo_url()}/commits/{c}"} for c in r.compare_commits.get(key, [])
                    ],
                },
                {},
            )
        return 404, {"message": f"fake GitHub does not implement {method} {rest}"}, {}

    def _page(self, path: str, items: list, query: dict, cap: int | None = None):
        per_page = min(int(query.get("per_page", 30)), 100)
        page = int(query.get("page", 1))
        if cap is not None:
            items = items[:cap]
        chunk = items[(page - 1) * per_page : page * per_page]
        headers = {}
        last = max(1, -(-len(items) // per_page))
        if page < last:
            headers["Link"] = (
                f'<{self.base_url}{path}?page={page + 1}&per_page={per_page}>; rel="next", '
                f'<{self.base_url}{path}?page={last}&per_page={per_page}>; rel="last"'
            )
        return 200, chunk, headers

    def _send(self, h: BaseHTTPRequestHandler, status: int, payload, headers=None) -> None:
        data = json.dumps(payload).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json; charset=utf-8")
        h.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)
