"""Canary rollouts without a database: the gate config's ``rollout:`` entry (``rule``), the
sequential test the rollout worker decides with (``sequence``: an always-valid confidence
sequence) and how a call is routed to the canary or the stable version (``routing``)."""
