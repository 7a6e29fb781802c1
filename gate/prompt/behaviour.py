"""What decides a prompt's behaviour, as one hash: a stored config (``PromptSpec.to_config``)
less what no request to the model nor the decision reads (``NOT_BEHAVIOUR``: the
description). A rollback's hold is keyed on it too (``gate.store.holds``): the rolled-back
config with only its description edited is the same behaviour, still held. Canonicalized
as ``gate.prompt.spec.config_hash`` does; no parser loaded (the store imports it)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

NOT_BEHAVIOUR = ("description",)


def behaviour_hash(config: Mapping[str, Any]) -> str:
    kept = {key: value for key, value in config.items() if key not in NOT_BEHAVIOUR}
    canonical = json.dumps(kept, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
