"""Settings, each with an environment variable and a default that serves one machine."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

DEFAULT_DATABASE_URL = "sqlite:///promptgate.db"

# What each numeric setting allows, both ends included. A value outside (0, a negative
# lease, NaN) is refused when the settings are read, in one line that names the variable:
# a chunk size of 0 used to start a worker that never scored anything.
RANGES: dict[str, tuple[float, float]] = {
    "lease_seconds": (0.1, 86400),
    "chunk_size": (1, 10000),
    "concurrency": (1, 4096),
    "write_back_window": (-1, 4096),
    "attempt_cap": (1, 100),
    "claim_cap": (1, 100),
    "finalize_attempts": (1, 1000),
    "backpressure_seconds": (0, 7 * 86400),
    "page_size": (1, 1_000_000),
    "page_bytes": (1, 1 << 30),
    "poll_interval": (0.001, 60),
    "poll_max_interval": (0.001, 3600),
    "idle_probe_interval": (0.001, 3600),
    "backoff_base": (0, 3600),
    "backoff_max": (0, 86400),
    "request_timeout": (0.01, 86400),
    "heartbeat_seconds": (0.05, 3600),
    "max_row_bytes": (1, 16 << 20),
    "rate_limit_headroom": (0.01, 1),
    "template_cpu_seconds": (0.01, 3600),
    "template_memory_mb": (1, 1 << 20),
    "template_mean_seconds": (0.001, 3600),
    "sandbox_processes": (1, 64),
    "upload_min_rate": (1, 1 << 30),
    "dry_run_seconds": (1, 86400),
    "diff_cache_bytes": (0, 1 << 40),
    "max_version_bytes": (1, 1 << 40),
    "rollout_interval": (0.01, 3600),
}
CHOICES: dict[str, tuple[str, ...]] = {"rate_limit_backend": ("sql", "redis")}
PUBLIC_URL_RE = re.compile(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~/-]*)?")


def public_url() -> str | None:
    """PROMPTGATE_PUBLIC_URL without its trailing slash (where readers reach the status page:
    the comment links to an update's page there), or None when it is not set."""
    found = Settings.from_env().public_url.strip()
    return found.rstrip("/") or None


def _plain(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else str(number)


def _env(name: str, default, cast):
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return cast(raw)
    except ValueError:
        from gate.errors import UsageError

        raise UsageError(f"environment variable {name}={raw!r} is not a valid {cast.__name__}") from None


@dataclass(frozen=True)
class Settings:
    database_url: str = DEFAULT_DATABASE_URL
    lease_seconds: float = 30.0  # how long a claim owns its rows
    chunk_size: int = 32  # items claimed by one execute claim
    concurrency: int = 8  # model calls in flight per execute process
    # answered calls that may wait for their write-back beyond the calls in flight, per execute
    # process (workers/execute/ledger.py): -1 is the concurrency; 0 frees a call slot only once
    # its answer is written back. A process killed loses at most concurrency + this many items' calls.
    write_back_window: int = -1
    attempt_cap: int = 3  # attempts (calls made and recorded) per item before its ERROR is final
    claim_cap: int = 5  # claims of an item in a row lost without a write-back (its worker died) before it ends ERROR
    finalize_attempts: int = 5  # a run's finalize failing this many times in a row (one process) ends it ERROR
    backpressure_seconds: float = 900.0  # how long an item may wait on a provider's 429s with Retry-After
    page_size: int = 5000  # most dataset rows per materialize page
    page_bytes: int = 4 * 1024 * 1024  # a page holds about this much row data at most (memory bound)
    poll_interval: float = 0.05  # first delay after an empty poll while work is open (seconds)
    poll_max_interval: float = 1.0  # idle delay grows up to this
    idle_probe_interval: float = 0.3  # an idle process asks "any open update?" this often (idle < 5 queries/s)
    backoff_base: float = 0.5  # first retry delay (seconds), doubled per attempt
    backoff_max: float = 30.0
    request_timeout: float = 30.0  # one model call
    heartbeat_seconds: float = 5.0
    max_row_bytes: int = 65536
    rate_limits: str = ""  # per-model budgets, e.g. "gpt-4o-mini=rpm:500,tpm:200000;*=rpm:1000"
    rate_limit_backend: str = "sql"  # where the shared buckets live: sql (the gate database) or redis
    redis_url: str = "redis://127.0.0.1:6379/0"  # with rate_limit_backend=redis
    rate_limit_headroom: float = 0.97  # the share of each limit the gate spends (providers count on their clock)
    template_cpu_seconds: float = 2.0  # CPU time one item's templates may take to render (gate/prompt/sandbox.py)
    template_memory_mb: int = 64  # memory they may take, beyond the sandbox process's own
    template_mean_seconds: float = 0.1  # a run's templates may take this long per item on average
    sandbox_processes: int = 2  # sandbox processes per worker process (for templates beyond item lookups)
    # The service: an upload's body must average this many bytes per second, after its first
    # --body-timeout seconds (gate/service/body_limits.py UploadPace). 64 KiB/s is half a megabit;
    # the largest upload (256 MiB) then has 68 minutes, a trickle a few seconds past the grace.
    upload_min_rate: int = 64 * 1024
    # ... and a dry run's body (a pull request's copy of a dataset file, compared, never stored)
    # must have come whole within this many seconds: 60 s is 240 MB at 4 MB/s, and a slot
    # taken by a trickle is free again within a minute, not the 68 minutes the rate allows.
    dry_run_seconds: float = 60.0
    # The service keeps the keys of the versions dry runs compare with (about 80 bytes a row),
    # at most this many bytes of them: 64 MiB holds some 800,000 rows; 0 keeps none
    # (gate/datasets/version_index.py).
    diff_cache_bytes: int = 64 * 1024 * 1024
    # The most row data one dataset version may store (ids, labels and inputs as stored):
    # four times the largest upload, so an honest file fits however its CSV columns expand
    # into JSON; a header that multiplies every row meets it (gate/datasets/importer.py).
    max_version_bytes: int = 1 << 30
    rollout_interval: float = 2.0  # the rollout worker looks at the canary rollouts this often (seconds)
    public_url: str = ""  # where readers reach the status page (https://gate.example): the comment links there

    ENV = {
        "database_url": "PROMPTGATE_DATABASE_URL",
        "lease_seconds": "PROMPTGATE_LEASE_SECONDS",
        "chunk_size": "PROMPTGATE_CHUNK_SIZE",
        "concurrency": "PROMPTGATE_CONCURRENCY",
        "write_back_window": "PROMPTGATE_WRITE_BACK_WINDOW",
        "attempt_cap": "PROMPTGATE_ATTEMPT_CAP",
        "claim_cap": "PROMPTGATE_CLAIM_CAP",
        "finalize_attempts": "PROMPTGATE_FINALIZE_ATTEMPTS",
        "backpressure_seconds": "PROMPTGATE_BACKPRESSURE_SECONDS",
        "page_size": "PROMPTGATE_PAGE_SIZE",
        "page_bytes": "PROMPTGATE_PAGE_BYTES",
        "poll_interval": "PROMPTGATE_POLL_INTERVAL",
        "poll_max_interval": "PROMPTGATE_POLL_MAX_INTERVAL",
        "idle_probe_interval": "PROMPTGATE_IDLE_PROBE_INTERVAL",
        "backoff_base": "PROMPTGATE_BACKOFF_BASE",
        "backoff_max": "PROMPTGATE_BACKOFF_MAX",
        "request_timeout": "PROMPTGATE_REQUEST_TIMEOUT",
        "heartbeat_seconds": "PROMPTGATE_HEARTBEAT_SECONDS",
        "max_row_bytes": "PROMPTGATE_MAX_ROW_BYTES",
        "rate_limits": "PROMPTGATE_RATE_LIMITS",
        "rate_limit_backend": "PROMPTGATE_RATE_LIMIT_BACKEND",
        "redis_url": "PROMPTGATE_REDIS_URL",
        "rate_limit_headroom": "PROMPTGATE_RATE_LIMIT_HEADROOM",
        "template_cpu_seconds": "PROMPTGATE_TEMPLATE_CPU_SECONDS",
        "template_memory_mb": "PROMPTGATE_TEMPLATE_MEMORY_MB",
        "template_mean_seconds": "PROMPTGATE_TEMPLATE_MEAN_SECONDS",
        "sandbox_processes": "PROMPTGATE_SANDBOX_PROCESSES",
        "upload_min_rate": "PROMPTGATE_UPLOAD_MIN_RATE",
        "dry_run_seconds": "PROMPTGATE_DRY_RUN_SECONDS",
        "diff_cache_bytes": "PROMPTGATE_DIFF_CACHE_BYTES",
        "max_version_bytes": "PROMPTGATE_MAX_VERSION_BYTES",
        "rollout_interval": "PROMPTGATE_ROLLOUT_INTERVAL",
        "public_url": "PROMPTGATE_PUBLIC_URL",
    }

    def __post_init__(self) -> None:
        """Every value in its range (``RANGES``, ``CHOICES``), or a UsageError naming the variable."""
        from gate.errors import UsageError

        for name, (low, high) in RANGES.items():
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not (math.isfinite(value) and low <= value <= high)
            ):
                raise UsageError(f"{self.ENV[name]}={value!r} is out of range: allowed {_plain(low)} to {_plain(high)}")
        if self.public_url and not PUBLIC_URL_RE.fullmatch(self.public_url):
            raise UsageError(
                f"PROMPTGATE_PUBLIC_URL={self.public_url[:100]!r} is not a plain http(s) URL "
                "(https://host[:port][/path], no query, no credentials)"
            )
        for name, allowed in CHOICES.items():
            if str(getattr(self, name)).strip().lower() not in allowed:
                raise UsageError(
                    f"{self.ENV[name]}={getattr(self, name)!r} is not allowed: allowed {' or '.join(allowed)}"
                )

    @classmethod
    def from_env(cls, **overrides) -> Settings:
        values = {}
        for f in fields(cls):
            env_name = cls.ENV[f.name]  # every field has its variable
            cast = type(f.default)
            values[f.name] = _env(env_name, f.default, cast)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    @property
    def window(self) -> int:
        """The write-back window in force: ``write_back_window``, or the concurrency when it is -1."""
        return self.concurrency if self.write_back_window < 0 else self.write_back_window

    def with_(self, **changes) -> Settings:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


TARGET_VARIABLES = ("PROMPTGATE_DATABASE_URL", "PROMPTGATE_URL")


def misspelt_target(env: Mapping[str, str]) -> str | None:
    """A variable set in ``env`` whose name is close to PROMPTGATE_DATABASE_URL or
    PROMPTGATE_URL but is neither (PROMPTGATE_DATABSE_URL): the one line saying so, for a
    command about to fall back to the default SQLite file in the current folder."""
    import difflib

    for name in sorted(env):
        if name in TARGET_VARIABLES or not env[name].strip() or "PROMPTGATE" not in name.upper():
            continue
        close = difflib.get_close_matches(name.upper(), TARGET_VARIABLES, n=1, cutoff=0.8)
        if close:
            return (
                f"{name} is set, but no setting has that name: did you mean {close[0]}? (without it "
                f"the gate would be {DEFAULT_DATABASE_URL}, a new file in this folder)"
            )
    return None
