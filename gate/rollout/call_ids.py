"""Call ids bound to what was served (issue 48): a runtime names each call of a canary
rollout by an id that carries the rollout, the version that answered, the process and a
sequence number, with a MAC (HMAC-SHA256, 128 bits kept) under the rollout's **call key**.

The call key is derived by the gate from a server secret (``HMAC(secret, rollout id)``,
``rollout_call_key``) and handed, with the prompt, only to tokens allowed to run that prompt
(a runtime token whose prompts include it: ``/v1/prompts/{name}/serve``), never to a read
token. The gate checks an id with two HMACs and no database read (``verify_call_id``), so a
token holding call ids nobody served — made up, or minted without the key — moves no
canary: such an event is refused and counted.

The id is ``g1`` and 54 URL-safe base64 characters (the feedback's 64-character limit):
rollout id (8 bytes), version (4), process tag (6: a hash of the process identity),
sequence number (6), MAC (16)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass

PREFIX = "g1"
_LAYOUT = struct.Struct(">QI6s6s")  # rollout, version, process tag, sequence (48 bits, big-endian)
MAC_BYTES = 16
ID_CHARS = len(PREFIX) + 54


@dataclass(frozen=True)
class CallId:
    rollout_id: int
    version: int
    process: str  # 12 hex digits: the process tag
    sequence: int


def rollout_call_key(secret: bytes, rollout_id: int) -> bytes:
    """The call key of rollout ``rollout_id`` under the gate's secret."""
    return hmac.new(secret, b"promptgate call key|%d" % rollout_id, hashlib.sha256).digest()


def process_tag(process_id: str) -> bytes:
    return hashlib.sha256(process_id.encode("utf-8", "surrogateescape")).digest()[:6]


def _mac(key: bytes, payload: bytes) -> bytes:
    return hmac.new(key, PREFIX.encode() + payload, hashlib.sha256).digest()[:MAC_BYTES]


def mint_call_id(key: bytes, rollout_id: int, version: int, process: bytes, sequence: int) -> str:
    payload = _LAYOUT.pack(rollout_id, version, process, (sequence % (1 << 48)).to_bytes(6, "big"))
    return PREFIX + base64.urlsafe_b64encode(payload + _mac(key, payload)).decode().rstrip("=")


def parse_call_id(call_id: str) -> tuple[CallId, bytes, bytes] | None:
    """(fields, payload, mac) of an id of this form, unchecked; None when it is not one."""
    if len(call_id) != ID_CHARS or not call_id.startswith(PREFIX):
        return None
    try:
        raw = base64.urlsafe_b64decode(call_id[len(PREFIX) :] + "==")
    except (ValueError, TypeError):
        return None
    if len(raw) != _LAYOUT.size + MAC_BYTES or PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=") != call_id:
        return None  # one spelling per id: a call counts once however it is written
    payload, mac = raw[: _LAYOUT.size], raw[_LAYOUT.size :]
    rollout_id, version, process, sequence = _LAYOUT.unpack(payload)
    return CallId(rollout_id, version, process.hex(), int.from_bytes(sequence, "big")), payload, mac


def verify_call_id(call_id: str, key_of: Callable[[int], bytes | None]) -> CallId | None:
    """The id's fields when its MAC verifies under ``key_of(rollout_id)`` (None: no key for
    that rollout), else None. No database read: ``key_of`` derives the key."""
    parsed = parse_call_id(call_id)
    if parsed is None:
        return None
    fields, payload, mac = parsed
    key = key_of(fields.rollout_id)
    if key is None or not hmac.compare_digest(_mac(key, payload), mac):
        return None
    return fields


class CallIds:
    """A process's minter: one sequence for every call it serves (thread-safe)."""

    def __init__(self, process_id: str):
        self.reset(process_id)

    def reset(self, process_id: str) -> None:
        """A new process identity (after fork): a new tag and a fresh sequence."""
        self.tag = process_tag(process_id)
        self._sequence = itertools.count(1)
        self._lock = threading.Lock()

    def mint(self, key: bytes, rollout_id: int, version: int) -> str:
        with self._lock:
            sequence = next(self._sequence)
        return mint_call_id(key, rollout_id, version, self.tag, sequence)
