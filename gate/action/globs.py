"""Path globs for choosing files, as the Action's ``prompts`` input writes them: ``*`` and
``?`` stay inside one folder, ``**`` spans folders, ``[...]`` is a character class,
``{a,b}`` alternatives, a leading ``!`` excludes."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence


def _expand_braces(pattern: str) -> list[str]:
    m = re.search(r"\{([^{}]*)\}", pattern)
    if not m:
        return [pattern]
    out = []
    for alt in m.group(1).split(","):
        out += _expand_braces(pattern[: m.start()] + alt + pattern[m.end() :])
    return out


def compile_glob(pattern: str) -> re.Pattern:
    """A path glob: ``*`` and ``?`` stay inside one folder, ``**`` spans folders
    (``a/**/b`` matches a/b, a/x/b, a/x/y/b; a trailing ``/**`` matches everything below),
    ``[...]`` is a character class and ``{a,b}`` alternatives."""
    alternatives = []
    for pat in _expand_braces(pattern.strip().lstrip("/")):
        while pat.startswith("./"):
            pat = pat[2:]
        i, out = 0, []
        while i < len(pat):
            if pat.startswith("**/", i) and (i == 0 or pat[i - 1] == "/"):
                out.append("(?:[^/]+/)*")
                i += 3
            elif pat.startswith("/**", i) and i + 3 == len(pat):
                out.append("(?:/.*)?")
                i += 3
            elif pat.startswith("**", i):
                out.append(".*")
                i += 2
            elif pat[i] == "*":
                out.append("[^/]*")
                i += 1
            elif pat[i] == "?":
                out.append("[^/]")
                i += 1
            elif pat[i] == "[" and "]" in pat[i + 2 :]:
                end = pat.index("]", i + 2)
                body = pat[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end + 1
            else:
                out.append(re.escape(pat[i]))
                i += 1
        alternatives.append("".join(out))
    return re.compile("(?:" + "|".join(alternatives) + r")\Z")


def split_patterns(patterns: str | Sequence[str]) -> list[str]:
    if isinstance(patterns, str):
        patterns = patterns.splitlines()
    return [p.strip() for p in patterns if p.strip() and not p.strip().startswith("#")]


class PathFilter:
    """Globs, one per line; a path matches when one pattern matches it and no ``!``
    pattern does."""

    def __init__(self, patterns: str | Sequence[str], default: str = "**"):
        items = split_patterns(patterns) or [default]
        self.include = [compile_glob(p) for p in items if not p.startswith("!")]
        self.exclude = [compile_glob(p[1:]) for p in items if p.startswith("!")]

    def __call__(self, path: str) -> bool:
        path = path.lstrip("/")
        return any(r.match(path) for r in self.include) and not any(r.match(path) for r in self.exclude)


def glob_filter(paths: Iterable[str], patterns: str | Sequence[str], default: str = "**") -> list[str]:
    match = PathFilter(patterns, default)
    return [p for p in paths if match(p)]
