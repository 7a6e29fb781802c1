"""Every setting is checked when it is read: a value out of its range is one line naming
the environment variable and the range allowed, never a worker that runs and gets nowhere
(a chunk size of 0 left updates PENDING for ever)."""

from __future__ import annotations

from dataclasses import fields

import pytest

from gate.errors import UsageError
from gate.settings import CHOICES, RANGES, Settings


@pytest.mark.parametrize(
    "variable, value",
    [
        ("PROMPTGATE_CHUNK_SIZE", "0"),
        ("PROMPTGATE_PAGE_SIZE", "0"),
        ("PROMPTGATE_LEASE_SECONDS", "-1"),
        ("PROMPTGATE_LEASE_SECONDS", "nan"),
        ("PROMPTGATE_REQUEST_TIMEOUT", "inf"),
        ("PROMPTGATE_CONCURRENCY", "0"),
        ("PROMPTGATE_ATTEMPT_CAP", "0"),
        ("PROMPTGATE_HEARTBEAT_SECONDS", "0"),
        ("PROMPTGATE_RATE_LIMIT_HEADROOM", "1.5"),
        ("PROMPTGATE_SANDBOX_PROCESSES", "0"),
        ("PROMPTGATE_RATE_LIMIT_BACKEND", "memcached"),
        ("PROMPTGATE_UPLOAD_MIN_RATE", "0"),
        ("PROMPTGATE_MAX_VERSION_BYTES", "0"),
    ],
)
def test_a_value_out_of_range_is_one_line_naming_the_variable_and_the_range(monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    with pytest.raises(UsageError) as err:
        Settings.from_env()
    message = str(err.value)
    assert variable in message and "allowed" in message and "\n" not in message, message


def test_the_defaults_and_the_edges_of_each_range_are_accepted():
    Settings()
    for name, (low, high) in RANGES.items():
        Settings().with_(**{name: low})
        Settings().with_(**{name: high})


def test_code_is_held_to_the_same_ranges():
    with pytest.raises(UsageError, match="PROMPTGATE_CHUNK_SIZE"):
        Settings().with_(chunk_size=0)


def test_every_setting_declares_what_it_allows():
    numeric = {f.name for f in fields(Settings) if isinstance(f.default, (int, float))}
    assert numeric == set(RANGES)
    assert set(Settings.ENV) == {f.name for f in fields(Settings)}
    assert set(CHOICES) <= {f.name for f in fields(Settings) if isinstance(f.default, str)}


def test_the_executors_concurrency_is_decided_in_one_place():
    """Issue 45.4: ``worker --concurrency``, ``run_until_terminal(concurrency=)`` (the demo, the
    Action) and ``PROMPTGATE_CONCURRENCY`` reach the executor by one path: ``worker_settings``
    decides, and the executor reads ``settings.concurrency`` alone."""
    import inspect

    from workers.execute.executor import Executor
    from workers.supervisor import make_poller, worker_settings

    base = Settings().with_(concurrency=3)
    assert worker_settings(base, 16).concurrency == 16  # an explicit value wins
    assert worker_settings(base, None).concurrency == 3  # none: the settings' (the variable's, else 8)
    assert worker_settings(base, 0).concurrency == 3  # as `concurrency or settings.concurrency` did
    with pytest.raises(UsageError, match="PROMPTGATE_CONCURRENCY"):
        worker_settings(base, 5000)  # held to the setting's range
    for fn in (Executor.__init__, make_poller):
        assert "concurrency" not in inspect.signature(fn).parameters, fn.__qualname__
