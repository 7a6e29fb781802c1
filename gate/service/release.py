"""What a release wait answers for: defined in ``gate.release`` (no database there, so the
service's client uses the very same rule without loading SQLAlchemy), re-exported here
under its old path."""

from ..release import (RELEASE_MODES, SHA_RE, Announcer, check_release_mode, combine_exit_codes, latest_per_prompt,
                       no_update, of_mode, release_updates)

__all__ = ["RELEASE_MODES", "SHA_RE", "Announcer", "check_release_mode", "combine_exit_codes", "latest_per_prompt",
           "no_update", "of_mode", "release_updates"]
