"""GitHub glue over PyGithub: the few REST calls the Action makes.

* the files a pull request changes (paginated: a PR may touch thousands of files);
* the files a push changed (the compare API between the push's before and after, or the
  commit's own files when there is no usable "before");
* the one report comment of a pull request, found again by its hidden marker **and** its
  author (the token's own user), edited in place, never duplicated. A comment that carries
  the marker but was written by anyone else is not ours: anyone may post the marker, and
  editing their comment would put our report under their name (and theirs under ours);
* the ``prompt-gate`` commit status, and a commit comment for pushes.

The client is lazy (no request until one is needed) and does not sleep between requests:
the Action makes a handful of calls per run, far from GitHub's secondary rate limits. A
request that cannot reach the API is not tried again (``RETRY``), never ten times with backoff
as PyGithub would, and fails as one GitHubError line, never a traceback.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from github import Auth, Github, GithubException
from requests.exceptions import RequestException
from urllib3.util.retry import Retry

from gate.errors import GateError, GitHubError
from gate.report.markdown import MARKER

STATUS_CONTEXT = "prompt-gate"
STATUS_STATES = ("pending", "success", "failure", "error")
DEFAULT_API_URL = "https://api.github.com"
NULL_SHA = "0" * 40
# The author of comments made with the workflow's GITHUB_TOKEN. Such a token may not read
# GET /user (403), so this is its identity when that fails; a reserved "[bot]" login no
# person can take.
ACTIONS_BOT_LOGIN = "github-actions[bot]"
# No retry: the Action's few calls are cheap to fail and to run again, and a retry storm (PyGithub
# tries ten times with backoff, a warning each) against an API that is down helps nobody.
RETRY = Retry(total=0, connect=0, read=0, status=0, redirect=0, raise_on_status=False)


@dataclass(frozen=True)
class ChangedFile:
    path: str
    status: str  # added, modified, removed, renamed, copied, changed, unchanged
    previous_path: str | None = None

    @property
    def exists(self) -> bool:
        return self.status != "removed"


API_ERRORS = (GithubException, RequestException)


def _wrap(what: str, exc: GithubException | RequestException) -> GitHubError:
    if isinstance(exc, RequestException):
        url = getattr(getattr(exc, "request", None), "url", None) or "the GitHub API"
        reason = type(exc).__name__.replace("Error", " error").strip()
        return GitHubError(f"GitHub: {what} failed: cannot reach {url.split('?')[0]} ({reason})")
    message = exc.data.get("message") if isinstance(exc.data, dict) else None
    return GitHubError(f"GitHub: {what} failed: {exc.status} {message or exc}")


def _changed(files: Iterable) -> list[ChangedFile]:
    seen: dict[str, ChangedFile] = {}
    for f in files:
        seen[f.filename] = ChangedFile(f.filename, f.status, getattr(f, "previous_filename", None))
    return list(seen.values())


class GitHubClient:
    """One repository on github.com or GitHub Enterprise (``api_url`` = GITHUB_API_URL)."""

    def __init__(
        self,
        token: str,
        repository: str,
        api_url: str | None = None,
        per_page: int = 100,
        timeout: int = 30,
        comment_author: str | None = None,
    ):
        if not token:
            raise GateError("no GitHub token: pass github-token (the workflow's GITHUB_TOKEN is enough)")
        if not repository or "/" not in repository:
            raise GateError(f"GITHUB_REPOSITORY {repository!r} is not owner/name")
        self.repository = repository
        self.gh = Github(
            base_url=(api_url or DEFAULT_API_URL).rstrip("/"),
            auth=Auth.Token(token),
            per_page=per_page,
            timeout=timeout,
            lazy=True,
            seconds_between_requests=None,
            seconds_between_writes=None,
            retry=RETRY,
        )
        self.repo = self.gh.get_repo(repository)
        self._own_login = comment_author or None

    def close(self) -> None:
        self.gh.close()

    # --- changed files -----------------------------------------------------------------------

    def pull_request_files(self, number: int) -> list[ChangedFile]:
        """Every file the pull request changes, all pages."""
        try:
            return _changed(self.repo.get_pull(number).get_files())
        except API_ERRORS as exc:
            raise _wrap(f"listing the files of pull request #{number}", exc) from None

    def commit_files(self, sha: str) -> list[ChangedFile]:
        try:
            return _changed(self.repo.get_commit(sha).files)
        except API_ERRORS as exc:
            raise _wrap(f"listing the files of commit {sha[:12]}", exc) from None

    def push_files(self, before: str | None, after: str) -> list[ChangedFile]:
        """The files a push changed: compare before...after; the head commit's files when
        the branch is new (before is all zeros) or before is gone (a force push). The
        compare API lists at most 300 files: beyond that, every pushed commit's files."""
        if not before or before == NULL_SHA:
            return self.commit_files(after)
        try:
            comparison = self.repo.compare(before, after)
            files = comparison.files
        except API_ERRORS as exc:
            if getattr(exc, "status", None) in (404, 422):
                return self.commit_files(after)
            raise _wrap(f"comparing {before[:12]}...{after[:12]}", exc) from None
        if len(files) < 300:
            return _changed(files)
        try:
            merged: dict[str, ChangedFile] = {f.path: f for f in _changed(files)}
            for commit in comparison.commits:
                for f in self.commit_files(commit.sha):
                    merged[f.path] = f
            return list(merged.values())
        except API_ERRORS as exc:
            raise _wrap("listing the pushed commits", exc) from None

    # --- reporting -------------------------------------------------------------------------------

    def own_login(self) -> str:
        """The login our comments carry: the token's user (GET /user), or the Actions bot
        for a token that may not read it (the workflow's GITHUB_TOKEN)."""
        if self._own_login is None:
            try:
                self._own_login = self.gh.get_user().login
            except API_ERRORS as exc:
                if getattr(exc, "status", None) not in (401, 403, 404):
                    raise _wrap("reading the token's user", exc) from None
                self._own_login = ACTIONS_BOT_LOGIN
        return self._own_login

    def find_comment(self, number: int, marker: str = MARKER):
        """The report comment of a pull request: the first whose body starts with the
        marker (a reply quoting it starts with '>', so it never matches) and whose author
        is us. Marker comments by anyone else are ignored."""
        mine = self.own_login().lower()
        try:
            for comment in self.repo.get_issue(number).get_comments():
                if (comment.body or "").startswith(marker) and (comment.user.login or "").lower() == mine:
                    return comment
        except API_ERRORS as exc:
            raise _wrap(f"listing the comments of #{number}", exc) from None
        return None

    def upsert_comment(
        self, number: int, body: str, marker: str = MARKER, create: bool = True
    ) -> tuple[int | None, bool]:
        """Edit the report comment in place, or create it (unless ``create`` is False).
        Returns (comment id or None, created)."""
        if not body.startswith(marker):
            body = f"{marker}\n{body}"
        existing = self.find_comment(number, marker)
        try:
            if existing is not None:
                existing.edit(body)
                return existing.id, False
            if not create:
                return None, False
            created = self.repo.get_issue(number).create_comment(body)
            return created.id, True
        except API_ERRORS as exc:
            raise _wrap(f"writing the report comment on #{number}", exc) from None

    def set_status(
        self, sha: str, state: str, description: str, target_url: str | None = None, context: str = STATUS_CONTEXT
    ) -> None:
        if state not in STATUS_STATES:
            raise ValueError(f"commit status state {state!r} is not one of {STATUS_STATES}")
        if len(description) > 140:
            description = description[:139] + "…"
        kwargs = {"target_url": target_url} if target_url else {}
        try:
            self.repo.get_commit(sha).create_status(state, description=description, context=context, **kwargs)
        except API_ERRORS as exc:
            raise _wrap(f"setting the {context} status on {sha[:12]}", exc) from None

    def commit_comment(self, sha: str, body: str) -> int:
        try:
            return self.repo.get_commit(sha).create_comment(body).id
        except API_ERRORS as exc:
            raise _wrap(f"commenting on commit {sha[:12]}", exc) from None
