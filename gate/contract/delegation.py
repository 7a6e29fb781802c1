"""``delegate``: a facade's method that is one of its parts' methods, so that a facade (the
service's ``Gate``, the client's ``RemoteGate``) composes plain classes, each built with what it
needs, instead of inheriting mixins that reach each other through ``self``."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def delegate(part: str, method: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[Any, P], R]:
    """A method that is ``method`` of the facade's attribute ``part``: the same name,
    parameters, answer and docstring (``inspect.signature`` reads them there), declared once,
    in the part's class."""
    name = method.__name__

    def call(self: Any, *args: P.args, **kwargs: P.kwargs) -> R:
        return getattr(getattr(self, part), name)(*args, **kwargs)

    functools.update_wrapper(call, method)
    return call
