"""Production's side of the gate, which ``gate.runtime`` stands on: where the runtime loads a
live prompt from (``sources``: the database, or the service with conditional requests), the
versions it serves and how a call is routed during a canary rollout (``versions``), the
result that says which version answered (``result``), and the two background threads that
keep the gate told without ever being on a call's path: what this process serves
(``reporter``) and production's feedback (``feedback``)."""
