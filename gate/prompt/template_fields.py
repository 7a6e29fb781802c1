"""Which item fields a prompt's templates read, from their syntax trees.

The gate can only vouch for a branch of a template that its datasets make it take: a
template that reads ``item.account_tier`` when no row has that field is evaluated on its
other branch only, and in production, where the field exists, it behaves as nobody tested.
So at submit (``gate.domain.fields``) the fields a template reads are compared with the
fields the mapped datasets' rows have; this module names them.

A field is read by any of these forms, wherever it stands (in a loop, a condition, a
filter's argument, a macro)::

    item.x    item['x']    item.get('x')    item.get('x', default)
    'x' in item    'x' not in item    item.x is defined    item.x | default(...)

``item.x.y`` and ``item['x'][0]`` read ``x`` (nested values are the field's own
business: the gate checks which top-level fields rows have).

Everything else that touches ``item`` is refused, because the gate could not name what it
depends on: a computed key (``item[name]``, ``item.get(k)``, ``k in item``), the whole item
used as a value (``{{ item }}``, ``item | tojson``, ``item | length``, ``for k in item``,
``item.items()``, ``item.keys()``, passing it to a macro, ``{% set it = item %}``, which
would alias it), a dict method other than ``get`` (``item.pop``, ``item.update``...: the
sandbox refuses them anyway), and assigning to ``item``. A template that lists the item's
fields prints something different for every row shape, and a branch could hang on a field
no row has; naming the fields is always possible and makes the dependence visible.
"""

from __future__ import annotations

from collections.abc import Iterable

from jinja2 import TemplateSyntaxError, nodes

from .templating import TemplateProblem, parse_template

ITEM = "item"
# ``item.<one of these>`` is the dict's method, not a field (Jinja tries the attribute first)
DICT_METHODS = frozenset(n for n in dir(dict) if not n.startswith("_"))


class DynamicAccess(TemplateProblem):
    """A template reads the item in a way that names no field."""


def template_fields(sources: Iterable[str]) -> tuple[str, ...]:
    """The item fields the templates read, sorted; DynamicAccess (one line) when one of
    them touches the item in a way that names no field, TemplateProblem when one cannot be
    parsed (a stored spec was checked when it was parsed, so that is not expected)."""
    found: set[str] = set()
    for source in sources:
        try:
            tree = parse_template(source)
        except (TemplateSyntaxError, RecursionError) as exc:
            raise TemplateProblem(f"template cannot be parsed: {type(exc).__name__}") from None
        _Reader(found).visit(tree)
    return tuple(sorted(found))


class _Reader:
    """A walk over the tree that takes each recognized access as a whole (recording its
    field and not visiting its ``item``); any ``item`` reached otherwise is refused."""

    def __init__(self, found: set[str]):
        self.found = found

    def visit(self, root: nodes.Node) -> None:
        stack = [root]  # iterative: the shape check bounds size, not our stack
        while stack:
            stack.extend(reversed(self._children(stack.pop())))

    def _children(self, node: nodes.Node) -> list[nodes.Node]:
        """Record what ``node`` reads when it is an access to a field; return the nodes
        still to visit."""
        if isinstance(node, nodes.Call) and _is_item_attr(node.node, "get"):
            return self._get_call(node)
        if isinstance(node, nodes.Getattr) and _is_item(node.node):
            if node.attr in DICT_METHODS:
                raise DynamicAccess(
                    f"template calls item.{node.attr}: only fields may be read from the item "
                    "(item.x, item['x'], item.get('x'), 'x' in item)"
                )
            self.found.add(node.attr)
            return []
        if isinstance(node, nodes.Getitem) and _is_item(node.node):
            return self._getitem(node)
        if isinstance(node, nodes.Compare):
            return self._compare(node)
        if isinstance(node, nodes.Name) and node.name == ITEM:
            if node.ctx != "load":
                raise DynamicAccess("template assigns to item: the gate could not tell which fields it reads")
            raise DynamicAccess(
                "template uses the whole item (printed, looped over, filtered or passed on): the "
                "gate can check only templates that name the fields they read (item.x, "
                "item['x'], item.get('x'), 'x' in item)"
            )
        return list(node.iter_child_nodes())

    def _get_call(self, call: nodes.Call) -> list[nodes.Node]:
        key = call.args[0] if call.args else None
        if (
            not isinstance(key, nodes.Const)
            or not isinstance(key.value, str)
            or call.kwargs
            or call.dyn_args is not None
            or call.dyn_kwargs is not None
            or len(call.args) > 2
        ):
            raise DynamicAccess(
                "template calls item.get with a computed key: the gate cannot tell which field "
                "it reads; name it (item.get('x'))"
            )
        self.found.add(key.value)
        return list(call.args[1:])

    def _getitem(self, node: nodes.Getitem) -> list[nodes.Node]:
        if not isinstance(node.arg, nodes.Const) or not isinstance(node.arg.value, str):
            raise DynamicAccess(
                "template reads item[...] with a computed key: the gate cannot tell which field "
                "it reads; name it (item.x or item['x'])"
            )
        self.found.add(node.arg.value)
        return []

    def _compare(self, node: nodes.Compare) -> list[nodes.Node]:
        """``'x' in item`` (and ``not in``) reads x; ``item`` on the left of a comparison
        is the whole item."""
        rest: list[nodes.Node] = [node.expr]
        left = node.expr
        for operand in node.ops:
            if operand.op in ("in", "notin") and _is_item(operand.expr):
                if not isinstance(left, nodes.Const) or not isinstance(left.value, str):
                    raise DynamicAccess(
                        "template tests '... in item' with a computed key: the gate cannot tell "
                        "which field it reads; name it ('x' in item)"
                    )
                self.found.add(left.value)
            else:
                rest.append(operand.expr)
            left = operand.expr
        return rest


def _is_item(node: nodes.Node) -> bool:
    return isinstance(node, nodes.Name) and node.name == ITEM and node.ctx == "load"


def _is_item_attr(node: nodes.Node, attr: str) -> bool:
    return isinstance(node, nodes.Getattr) and node.attr == attr and _is_item(node.node)
