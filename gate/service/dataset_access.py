"""Which dataset sources the service may read for a caller. A source registered, or synced,
through the service is read on the server with the server's environment, so a token holder
must not be able to make it read anything of the server's:

* no file: a path, ``file://`` or an SQLite database (``sql+sqlite:///path``);
* no ``${VAR}``, in any part and after any percent-decoding: the CLI fills those in from its own environment (an
operator's tokens on
  the operator's machine); on the server they would be the server's secrets (the database
  URL, provider keys), sent to a URL of the caller's choosing;
* no ``query_file`` and no driver option outside a short list: ``query_file`` reads a file
  of the server's, and driver options such as ``local_infile`` or ``read_default_file``
  make the driver read them.

What such sources need (a token in an environment variable, a query in a file) is for the
CLI on the database (``--database-url``). Where the readers may connect, and the
readers' own refusal to expand, is ``gate.datasets.sources.egress`` (the service opens every
source with it)."""

from __future__ import annotations

import os
import re
from dataclasses import replace
from types import SimpleNamespace
from urllib.parse import parse_qsl, unquote_plus, urlsplit

from gate.datasets.readability import version_readable
from gate.datasets.sources import scheme_of, shown_source
from gate.errors import NotFound, UsageError
from gate.kinds import checks_of
from gate.records.pinned import Pinned
from gate.states import RunStatus
from gate.verdict.reasons import ITEM_DETAIL
from gate.verdict.update_outcome import run_checks

SERVER_FILES = "the service reads no file on its machine: give an https://, s3:// or sql+ database source"
SQL_PARAMS = frozenset({"query", "sslmode", "connect_timeout", "charset", "application_name"})
BY_DATABASE = "or register it with --database-url"


def reads_server_files(source: str) -> bool:
    """Would reading ``source`` read a file of the server's: a path, file://, SQLite?"""
    scheme = scheme_of(source.strip())
    return scheme == "file" or scheme.startswith("sql+sqlite")


MAX_DECODINGS = 8


def decoded_forms(uri: str) -> list[str]:
    """``uri`` and its percent-decodings, each round decoding the last, until stable (at
    most ``MAX_DECODINGS`` rounds; a form still changing after them is returned too)."""
    forms = [uri]
    for _ in range(MAX_DECODINGS):
        decoded = unquote_plus(forms[-1])
        if decoded == forms[-1]:
            break
        forms.append(decoded)
    return forms


def remote_source_problem(source: str) -> str | None:
    """Why the service will not read ``source`` for a caller (None: it may)."""
    uri = source.strip()
    scheme = scheme_of(uri)
    if reads_server_files(uri):
        return SERVER_FILES
    forms = decoded_forms(uri)
    if any("${" in form for form in forms):
        return (
            "${VAR} in a source sent to the service (in any part, percent-encoded or not) would be filled "
            "in from the server's environment"
        )
    if len(forms) > MAX_DECODINGS:
        return f"a source sent to the service is percent-encoded more than {MAX_DECODINGS} times over"
    if scheme == "s3" and not s3_bucket_allowed(urlsplit(uri).netloc):
        return (
            "an s3:// source is read with the server's own AWS credentials, so the service reads one for a "
            "caller only from a bucket the operator lists (PROMPTGATE_SOURCE_S3_BUCKETS)"
        )
    if scheme.startswith("sql+"):
        if "#" in uri:  # urlsplit stops at a fragment, SQLAlchemy's URL parser does not
            return "a sql+ source sent to the service cannot hold '#' (a database URL has no fragment)"
        refused = sorted(sql_option_names(uri) - SQL_PARAMS)
        if refused:
            return (
                f"the service takes no {refused[0][:40]!r} option in a sql+ source (only "
                f"{', '.join(sorted(SQL_PARAMS))})"
            )
    return None


S3_BUCKETS_ENV = "PROMPTGATE_SOURCE_S3_BUCKETS"


def s3_bucket_allowed(bucket: str) -> bool:
    """Is ``bucket`` one the operator lets callers read with the server's AWS credentials
    (``PROMPTGATE_SOURCE_S3_BUCKETS``: names, comma-separated, or ``*``; default none)?"""
    listed = {name.strip() for name in os.environ.get(S3_BUCKETS_ENV, "").split(",") if name.strip()}
    return "*" in listed or bucket in listed


def sql_option_names(uri: str) -> set[str]:
    """The option names of a ``sql+`` source as the reader will see them: SQLAlchemy's own
    parser (``make_url``), and ``urlsplit``'s for good measure."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    names = {key for key, _ in parse_qsl(urlsplit(uri).query, keep_blank_values=True)}
    try:
        names |= set(make_url(uri[len("sql+") :]).query)
    except (ArgumentError, ValueError):
        pass  # not a URL the reader could open either: it refuses it by itself
    return names


def uploaded_source(config_path: str, source: str) -> str:
    """A file dataset of a gate config synced through the service, whose rows the client
    uploads: ``upload://`` its repository path (the config's path, then the source's)."""
    from gate.datasets.sources.upload import repo_path_of, upload_uri

    return upload_uri(repo_path_of(config_path, source.strip()))


def check_remote_source(source: str, where: str = "") -> None:
    problem = remote_source_problem(source)
    if problem:
        raise UsageError(f"{where}{problem}, {BY_DATABASE}")


SOURCE_KEYS = frozenset({"source_uri", "source"})
OPTION_KEYS = frozenset({"options", "source_options"})


def scrubbed(data):
    """Encoded data as the service shows it to any caller: a source URI as
    ``sources.shown_source`` shows it (no password, no query-string token, a file by its
    name only: a reader of the status page or the API needs which source, not its
    credentials nor the server's paths), and no ``base_dir`` (a folder of the machine
    that registered it)."""
    if isinstance(data, list):
        return [scrubbed(v) for v in data]
    if not isinstance(data, dict):
        return data
    out = {}
    for key, value in data.items():
        if key in SOURCE_KEYS and isinstance(value, str):
            out[key] = shown_source(value)
        elif key in OPTION_KEYS and isinstance(value, dict):
            out[key] = scrubbed({k: v for k, v in value.items() if k != "base_dir"})
        else:
            out[key] = scrubbed(value)
    return out


def version_shown(scope: str | None, version):
    """A version as a caller of ``scope`` sees it. One who may not read its rows
    (``readability.version_readable``: a holdout's) gets its totals only: how many rows,
    how many item fields they have and whether those were too many to count, how many
    expected fields, how many rows are protected. Not a field's name, nor how many rows
    have it (``fields["counts"]``), nor anything of an expected field (its name, kinds,
    values and how many rows expect each): a pull request's token must not learn a
    holdout's columns. The label counts stay (every report says them)."""
    if version is None or not version.fields or version_readable(scope, version):
        return version
    fields = version.fields
    shown = {key: fields[key] for key in ("rows", "capped", "protected") if key in fields}
    shown["field_count"] = len(fields.get("counts") or {})
    expected = fields.get("expected")
    if isinstance(expected, dict):
        shown["expected"] = {"fields": None, "field_count": len(expected.get("fields") or {})}
    return replace(version, fields=shown)


HOLDOUT_ROWS = (
    "dataset {name}'s version {version} was not imported from a repository's file (the operator "
    "registered it from elsewhere, a holdout): reading its rows needs an admin token"
)


def holdout_items_hidden(report, gate):
    """``report`` (a ``gate.report.update.UpdateReport``) as a reader who is not admin sees
    it: of each run on a version whose rows that reader may not read
    (``readability.version_readable``: the version the run pinned, imported from a source
    no repository holds), no item — no failing, broken, wavering or protected sample (ids,
    expected labels and the model's answers, which a pull request's prompt can make repeat
    the item), no item detail (what its reason leaves out: ``gate.verdict.reasons``) — and
    its slices by rank, not by value ("slice 1", "slice 2" …: a slice's value is a cell of
    the dataset; the checks of ``min_slice_accuracy`` are said again over those names). The
    counts, bars and verdict stay. A run whose version is gone (pruned) is hidden too.

    The run's and the update's ``reason`` go out as they are: they are built naming no
    item (``gate.verdict.reasons``; the tests of issue 33 hold each way a reason is made), so there
    is nothing in them to hide. A filter here could not tell an item's value in a sentence
    from the gate's own words without reading the rows (an item id "20" against "20 rows"),
    and the update's reason is listed (``GET /v1/updates``, the status page's list) where
    no report is built."""

    def readable(run) -> bool:
        if run.dataset_version_id is None:
            return False
        try:
            return version_readable(None, gate.dataset_version(run.dataset, run.dataset_version_id))
        except NotFound:
            return False

    runs = [r if readable(r) else _without_items(r) for r in report.runs]
    hidden = [r.dataset for r, shown in zip(report.runs, runs, strict=True) if shown is not r]
    update = report.update
    if hidden and update.reason:
        update = replace(update, reason=without_field_figures(update.reason, hidden))
    return replace(report, runs=runs, update=update)


FIELD_FIGURE_MARK = "min_field_accuracy["


def updates_shown(scope: str | None, updates: list, gate) -> list:
    """``updates`` (``Update`` records) as a reader of ``scope`` sees them in a list
    (``GET /v1/updates``, the updates page, a prompt's page): each one's reason less a
    failing per-field bar's figure on a dataset the reader may not read
    (``without_field_figures``, as ``holdout_items_hidden`` leaves it out of the report).
    Only the updates whose reason names a per-field bar are looked into."""
    if scope == "admin":
        return updates
    named = [u.id for u in updates if u.reason and FIELD_FIGURE_MARK in u.reason]
    if not named:
        return updates
    hidden = gate.unreadable_datasets(named, lambda version: version_readable(scope, version))
    return [replace(u, reason=without_field_figures(u.reason, hidden[u.id])) if u.id in hidden else u for u in updates]


def history_shown(scope: str | None, rows: list[dict], gate) -> list[dict]:
    """A prompt's history rows (``Gate.history``) as a reader of ``scope`` sees them: each
    row's update summary's reason as ``updates_shown`` leaves it."""
    if scope == "admin":
        return rows
    named = [
        r["update"]["id"]
        for r in rows
        if isinstance(r.get("update"), dict) and FIELD_FIGURE_MARK in (r["update"].get("reason") or "")
    ]
    if not named:
        return rows
    hidden = gate.unreadable_datasets(named, lambda version: version_readable(scope, version))
    out = []
    for row in rows:
        update = row.get("update")
        if isinstance(update, dict) and update.get("id") in hidden:
            row = {**row, "update": {**update, "reason": without_field_figures(update["reason"], hidden[update["id"]])}}
        out.append(row)
    return out


def without_field_figures(reason: str, datasets: list[str]) -> str:
    """``reason`` less the figure a failing ``min_field_accuracy`` bar names for each of
    ``datasets`` (holdouts: "h min_field_accuracy[amount] 60.0% < bar 80%" becomes "h
    min_field_accuracy[amount] (figure left out) < bar 80%"): a per-field figure of a holdout is
    admin's (issue 48, finding 4). The bar and that it failed stay."""
    for name in datasets:
        pattern = re.escape(name) + r" (min_field_accuracy\[[^\]]*\]) [0-9.]+%"
        reason = re.sub(pattern, rf"{_escaped(name)} \1 (figure left out)", reason)
    return reason


def _escaped(text: str) -> str:
    """``text`` as a literal in a ``re.sub`` replacement (a backslash is its one special)."""
    return text.replace("\\", "\\\\")


def _without_items(run):
    metrics = dict(run.metrics or {})
    metrics.pop(ITEM_DETAIL, None)  # the ids and values its reason leaves out (gate.verdict.reasons)
    if isinstance(metrics.get("protected"), dict):
        metrics["protected"] = {**metrics["protected"], "samples": []}
    protected = {**run.protected, "samples": []} if run.protected else run.protected
    slices, checks = run.slices, run.checks
    if isinstance(metrics.get("slices"), dict):
        metrics["slices"] = _ranked(metrics["slices"])
        slices = _ranked(run.slices) if run.slices else run.slices
        if run.status == RunStatus.DONE:  # the checks as run_report makes them, over the ranks
            judged = SimpleNamespace(metrics=metrics, pinned=Pinned.of(run.pinned), min_accuracy=run.bar)
            checks = [c.to_dict() for c in run_checks(judged, checks_of(judged))]
    return replace(
        run,
        reason=without_field_figures(run.reason, [run.dataset]) if run.reason else run.reason,
        failures=[],
        broken=[],
        unstable=[],
        protected=protected,
        slices=slices,
        checks=[_without_field_figure(c) for c in checks],
        metrics=_without_field_figures(metrics) if run.metrics else run.metrics,
        fields_read=None,
        pinned=_without_field_counts(run.pinned),
        fields=None,
        tool_calls=None,
    )


FIELD_FIGURES_WITHHELD = "a holdout's per-field and per-check figures are shown to admin only"


def _without_field_figures(metrics: dict) -> dict:
    """A holdout run's metrics less what a fields or tool_call decision counts per field or
    argument (issue 48, findings 3 and 4): a label field's confusion matrix names the
    holdout's expected values and how many rows have each, and an argument's ``compared``
    how many rows expect it. What stays of ``fields``: how many items (the holdout's size);
    of ``tool_calls``: how many of the candidate's own answers were not JSON or off their
    schema (not the rows' expected calls, hence not ``parallel``). Nor a checks decision's per-check
    counts (``checks``): a pull request names up to 32 checks (a regex, or ``equals`` an item's
    column, over an answer that may repeat the item), each a count over the holdout's rows."""
    out = {key: value for key, value in metrics.items() if key not in ("field_flips", "checks")}
    if isinstance(out.get("fields"), dict):
        out["fields"] = {"items": out["fields"].get("items"), "withheld": True}
        stop = out.get("stop")
        if isinstance(stop, dict) and isinstance(stop.get("best"), dict):  # an early stop's best completion
            best = {key: value for key, value in stop["best"].items() if key not in ("confusion", "fields")}
            out["stop"] = {**stop, "best": best}
    if isinstance(out.get("tool_calls"), dict):
        kept = ("arguments_not_json", "arguments_off_schema")
        out["tool_calls"] = {key: out["tool_calls"][key] for key in kept if key in out["tool_calls"]}
    return out


def _without_field_figure(check: dict) -> dict:
    """A per-field or per-check bar on a holdout: its pass or fail, not its figure (right /
    compared, passed / scored) nor its note ("N of M items failed it")."""
    if check.get("bar") not in ("min_field_accuracy", "min_check_rate") or check.get("value") is None:
        return check
    return {**check, "value": None, "note": FIELD_FIGURES_WITHHELD}


def _without_field_counts(pinned: dict | None) -> dict | None:
    """What the run pinned, less how many of the dataset's rows have each field its templates
    read: for a holdout, that count tells a template's author which columns the holdout has
    (the field check at submit tells them nothing either: ``gate.domain.admission``)."""
    if not pinned or "fields" not in pinned:
        return pinned
    return {key: value for key, value in pinned.items() if key != "fields"}


def _ranked(sliced: dict) -> dict:
    """Slices named by their rank ("slice 1" the largest), not their value."""
    return {**sliced, "slices": [{**s, "value": f"slice {n}"} for n, s in enumerate(sliced.get("slices") or (), 1)]}
