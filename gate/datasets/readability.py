"""Whose rows a caller may read. An admin token reads any; any other caller only rows a
repository holds anyway: a file a gate config declared (``declared_in``), or a file's
upload (``upload://``). Rows the operator registered from elsewhere (a private holdout, a
warehouse query) show their counts, never their rows, ids, column names or values: a
pull request's token must not learn the items it is judged on.

Decided per **version**, from the source that version was imported from (each stores its
own: ``dataset_version.source_uri`` and its options), and per run from the version it
pinned: a holdout later re-pointed at a repository file keeps its older versions, and the
items of the runs on them, for admin (the dataset's source now says nothing of them). A
version whose content a repository file gives again later is the same version (an import
of identical rows makes none): it stays as readable as its first source made it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .sources import scheme_of
from .sources.upload import UPLOAD_SCHEME


def repository_holds(source_uri: str | None, options: Mapping[str, Any] | None) -> bool:
    """Do the rows of ``source_uri`` (with these options) come from a repository: an upload
    of a file, or a file a gate config declared?"""
    scheme = scheme_of(source_uri or "")
    return scheme == UPLOAD_SCHEME or (scheme == "file" and bool((options or {}).get("declared_in")))


def version_readable(scope: str | None, version) -> bool:
    """May a caller of ``scope`` (None: anonymous, or any reader) read the rows of
    ``version`` (a ``DatasetVersion``; None: one that is not there, which nobody but admin
    reads)?"""
    if scope == "admin":
        return True
    return version is not None and repository_holds(version.source_uri, version.source_options)
