"""The four worker roles of prompt-gate, their shared poller and the supervisor.

materialize → execute → finalize → reconcile: each polls rows in one state and moves them
to the next with a guarded UPDATE. The database is the only coordination medium.
"""

ROLES = ("materialize", "execute", "finalize", "reconcile")
