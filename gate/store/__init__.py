"""Every SQL statement of prompt-gate. Workers, the service and the CLI import each
statement from its module (``from gate.store.items import claim_items``), so who may run
which statement is a matter of imports (tests/unit/test_structure.py); none of them builds SQL.

Conventions: a function takes an open ``Connection`` inside the caller's transaction
(the caller owns commit boundaries: ``gate.db.transaction``), every state change is one
conditional UPDATE whose row count is checked, and every write-back of leased work is
guarded by the lease token and ``lease_until > now``. Time is ``db_now()``: the database
server's UTC clock.

Modules, bottom up (each imports only the ones above it):

* ``schema``: the tables and their column types, ``EPOCH``, ``new_token``.
* ``dialect``: SQL spelled per dialect: ``db_now``, ``seconds_since``, ``least``,
  ``greatest``, ``floor_div``, ``json_text``.
* ``textsql``: the PyMySQL text form of the hot statements, compiled once per shape from
  their one SQLAlchemy definition (in ``versions``, ``items``, ``answers``) and filled with
  MySQL literals.
* one module per domain noun: ``datasets`` (datasets and prompt-dataset bars),
  ``versions`` (a dataset's imported, immutable versions and their rows), ``live``
  (the live ``prompt`` table and its ``prompt_version`` history), ``locks`` (the
  per-prompt lock rows submissions serialize on), ``providers``, ``updates``, ``runs``,
  ``items`` (claimed, leased, written back), ``answers`` (kept for reuse),
  ``item_stats`` (what a run's items add up to), ``stops`` (a run's running counts, the stop
  of an update before all its items are called), ``spend`` (limits, reservations against
  them, counters), ``workers``, ``ratelimits`` (rate-limit
  buckets and usage), ``retention`` (what ``prune`` may delete), ``tokens`` (the HTTP
  service's bearer tokens, as hashes), ``prompt_settings`` (what the gate config declares per
  prompt), ``fleet`` (counts for the status page and /metrics), ``fields`` (the per-field
  figures of a fields decision), ``policy`` (slices, protected and accepted items),
  ``holds`` (configs a rollback holds), ``rollouts`` (canary rollouts), ``live_requests``
  (a rollback or a canary's decision waiting for the reconcile step).
* ``live_transition``: the one writer of the live table, the reconcile step's statements
  (an apply, a live request carried out), composed of ``live``, ``holds``, ``rollouts``,
  ``live_requests``, ``locks`` and ``updates`` in the caller's transaction.
"""
