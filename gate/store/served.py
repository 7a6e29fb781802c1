"""What production serves (``served_report``): each runtime process's report, per prompt, of
the version it serves (during a canary rollout, the canary and the stable version beside
it). A process is **active** while it reports: its last report is at most ``2 × ttl`` old
(one missed report forgiven, ``ACTIVE_GRACE`` seconds of slack); it is **stale** when,
active, it serves an older version than live and live has been live for longer than
``2 × ttl`` (it should have picked it up by then). Times are the database's."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import and_, case, delete, func, literal, or_, select
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.engine import Connection

from gate.records import ServedProcess

from .dialect import db_now, seconds_since
from .schema import prompt, served_report

ACTIVE_GRACE = 1.0  # seconds beyond 2 × ttl before a silent process no longer counts
REPORT_COLUMNS = ("host", "pid", "version", "stable_version", "rollout_id", "loaded_at", "ttl_seconds", "counted")


def _active(r=served_report):
    return seconds_since(r.c.last_seen) <= r.c.ttl_seconds * 2 + ACTIVE_GRACE


def _counted(r=served_report):
    """Reports from a reporter that may run the prompt (issue 48): only they count."""
    return r.c.counted == 1


def _stale(r=served_report, p=prompt):
    return and_(r.c.version < p.c.version, seconds_since(p.c.updated_at) > r.c.ttl_seconds * 2)


def report_served(conn: Connection, reported_by: str, rows: Sequence[dict]) -> int:
    """Upsert one batch of reports under ``reported_by``, in one statement. Each row is a
    dict of ``process_id``, ``prompt_name``, ``REPORT_COLUMNS`` but ``loaded_at``, and
    ``loaded_seconds_ago`` (a process's own clock is never trusted: the database's now less
    that age is when it loaded), and ``counted`` (1: the reporter may run the prompt);
    ``last_seen`` is now."""
    if not rows:
        return 0
    values = [
        {
            **{k: v for k, v in row.items() if k != "loaded_seconds_ago"},
            "loaded_at": db_now(-float(row["loaded_seconds_ago"])),
            "reported_by": reported_by,
            "last_seen": db_now(),
        }
        for row in rows
    ]
    if conn.dialect.name == "mysql":
        mysql_upsert = mysql.insert(served_report).values(values)
        conn.execute(
            mysql_upsert.on_duplicate_key_update(
                last_seen=db_now(), **{c: getattr(mysql_upsert.inserted, c) for c in REPORT_COLUMNS}
            )
        )
    else:
        sqlite_upsert = sqlite.insert(served_report).values(values)
        conn.execute(
            sqlite_upsert.on_conflict_do_update(
                index_elements=["reported_by", "process_id", "prompt_name"],
                set_={"last_seen": db_now(), **{c: getattr(sqlite_upsert.excluded, c) for c in REPORT_COLUMNS}},
            )
        )
    return len(values)


def processes_of_reporter(conn: Connection, reported_by: str, besides: Sequence[str] = ()) -> int:
    """How many distinct active processes ``reported_by`` reports for, not counting those in
    ``besides`` (a token's bound: ``gate.domain.served``)."""
    r = served_report
    where = [r.c.reported_by == reported_by, _active()]
    if besides:
        where.append(r.c.process_id.not_in(list(besides)))
    return int(conn.execute(select(func.count(func.distinct(r.c.process_id))).where(*where)).scalar() or 0)


def served_of_prompt(conn: Connection, prompt_name: str) -> list[ServedProcess]:
    """The prompt's active processes, newest version first, each marked stale or not."""
    r, p = served_report, prompt
    rows = conn.execute(
        select(
            r,
            seconds_since(r.c.last_seen).label("seen_ago"),
            case((_stale(), 1), else_=0).label("is_stale"),
        )
        .select_from(r.outerjoin(p, p.c.name == r.c.prompt_name))
        .where(r.c.prompt_name == prompt_name, _active(), _counted())
        .order_by(r.c.version.desc(), r.c.host, r.c.pid)
    )
    return [_process(row) for row in rows]


def uncounted_of_prompt(conn: Connection, prompt_name: str) -> int:
    """The prompt's active processes reported by tokens that may not run it (read tokens)."""
    r = served_report
    where = (r.c.prompt_name == prompt_name, _active(), r.c.counted == 0)
    return int(conn.execute(select(func.count()).where(*where)).scalar() or 0)


def _process(row) -> ServedProcess:
    return ServedProcess(
        row.process_id,
        row.prompt_name,
        row.host,
        int(row.pid),
        int(row.version),
        None if row.stable_version is None else int(row.stable_version),
        None if row.rollout_id is None else int(row.rollout_id),
        row.loaded_at,
        row.last_seen,
        float(row.ttl_seconds),
        row.reported_by,
        max(0.0, float(row.seen_ago or 0.0)),
        bool(row.is_stale),
    )


def stale_processes(conn: Connection, limit: int = 100) -> list[ServedProcess]:
    """Every prompt's stale processes (the workers page), at most ``limit``."""
    r, p = served_report, prompt
    rows = conn.execute(
        select(r, seconds_since(r.c.last_seen).label("seen_ago"), literal(1).label("is_stale"))
        .select_from(r.join(p, p.c.name == r.c.prompt_name))
        .where(_active(), _stale(), _counted())
        .order_by(r.c.prompt_name, r.c.host, r.c.pid)
        .limit(limit)
    )
    return [_process(row) for row in rows]


def served_counts(conn: Connection) -> dict[str, int]:
    """Active runtime process-prompt pairs, and how many of them are stale (/metrics)."""
    r, p = served_report, prompt
    row = conn.execute(
        select(func.count(), func.coalesce(func.sum(case((_stale(), 1), else_=0)), 0))
        .select_from(r.outerjoin(p, p.c.name == r.c.prompt_name))
        .where(_active(), _counted())
    ).one()
    return {"served": int(row[0] or 0), "stale": int(row[1] or 0)}


def prune_served(conn: Connection, older_than: float, limit: int) -> int:
    """Delete up to ``limit`` reports whose process has been silent for ``older_than`` s."""
    r = served_report
    old = conn.execute(
        select(r.c.reported_by, r.c.process_id, r.c.prompt_name)
        .where(r.c.last_seen < db_now(-float(older_than)))
        .limit(limit)
    ).all()
    if not old:
        return 0
    keys = [or_(*(and_(r.c.reported_by == a, r.c.process_id == b, r.c.prompt_name == c) for a, b, c in old))]
    return conn.execute(delete(r).where(*keys)).rowcount
