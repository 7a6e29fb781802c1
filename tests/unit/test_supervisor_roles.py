"""Every role a worker runs has its module in ``ROLE_MODULES``, the list the fork server of
``--processes N`` preloads (workers/fork_server.py): a role added without it would make
``supervise`` fail for that role, or fork processes that import it again each time."""

from __future__ import annotations

import importlib

from workers import ROLES
from workers.supervisor import ROLE_MODULES


def test_every_role_has_the_module_its_poller_comes_from():
    assert set(ROLE_MODULES) == set(ROLES)
    for module in ROLE_MODULES.values():
        importlib.import_module(module)
