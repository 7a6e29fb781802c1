"""The five worker roles of prompt-gate, their shared poller and the supervisor.

materialize → execute → finalize → reconcile: each polls rows in one state and moves them
to the next with a guarded UPDATE; rollout decides the canary rollouts an apply starts
(``workers.rollout``). The database is the only coordination medium.
"""

ROLES = ("materialize", "execute", "finalize", "reconcile", "rollout")
