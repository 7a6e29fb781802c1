"""The service's routes for production (issue 39): ``ServedClient``, the runtime's connection
(a live prompt read with a conditional request, what it serves reported, feedback sent;
short timeouts, since it runs beside production's calls), and ``ServedRemote``, what the
CLI reads of the fleet and the rollouts through ``RemoteGate``.
Each method imports the dataclasses it decodes (``gate.records``): a `submit` through the
service sends its request before they load (``remote``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from gate.contract.codec import decode as wire_decode
from gate.errors import first_line

from .session import ServiceSession, Unreachable, path_segment
from .transport import Timeouts, Transport, TransportError

RUNTIME_TIMEOUTS = Timeouts(connect=2.0, read=5.0)


class ServedClient(ServiceSession):
    """One connection of a runtime process to the gate's service."""

    def __init__(self, url: str, token: str | None = None):
        super().__init__(url, token)
        self.http = Transport(self.url, self.http.headers, RUNTIME_TIMEOUTS)

    def serve_document(self, name: str, etag: str | None = None) -> dict | None:
        """What the runtime needs to serve ``name``; None when it is unchanged since the
        load whose ``etag`` is given (304: one round trip, no body)."""
        headers = {"If-None-Match": etag} if etag else None
        try:
            response = self.http.request("GET", f"/v1/prompts/{path_segment(name)}/serve", headers=headers)
        except TransportError as exc:
            raise Unreachable(f"cannot reach the gate: {first_line(exc)}") from None
        if response.status_code == 304:
            return None
        return self._answer(response)

    def report_served(self, rows: list[dict]) -> dict:
        return self._call("POST", "/v1/served", body={"reports": rows})

    def send_feedback(self, events: list[dict]) -> dict:
        return self._call("POST", "/v1/feedback", body={"events": events})


def _times(view: dict, *keys: str) -> dict:
    for key in keys:
        if isinstance(view.get(key), str):
            view[key] = dt.datetime.fromisoformat(view[key])
    return view


class ServedRemote:
    """``RemoteGate``'s reads of what production serves and of the canary rollouts, each made
    with ``call`` (a session's ``_call``)."""

    def __init__(self, call: Callable[..., Any]):
        self._call = call

    def served(self, name: str) -> dict:
        from gate.records import ServedProcess

        data = self._call("GET", f"/v1/prompts/{path_segment(name)}/live")["served"]
        data["processes"] = wire_decode(list[ServedProcess], data["processes"])
        return data

    def rollouts(self, name: str, limit: int = 20) -> list[dict]:
        found = self._call("GET", f"/v1/prompts/{path_segment(name)}/rollouts", params={"limit": limit})
        return [_times(r, "started_at", "decided_at") for r in found]

    def rollout_of_update(self, update_id: int) -> dict | None:
        found = self._call("GET", f"/v1/updates/{int(update_id)}/rollout")["rollout"]
        return None if found is None else _times(found, "started_at", "decided_at")

    def list_live(self) -> list[dict]:
        return [_times(p, "updated_at") for p in self._call("GET", "/v1/prompts")]
