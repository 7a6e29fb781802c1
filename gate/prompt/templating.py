"""Prompt templates are untrusted input (they arrive in pull requests).

They render in Jinja2's sandbox with StrictUndefined, and the only name they may use is
``item``. ``check_template`` refuses, before anything is stored, a template that names
anything else or reaches for a private attribute (``{{ ''.__class__ }}``); the sandbox
still guards rendering.

A render's problem never quotes the item. Jinja's own messages do: ``{{ {}[item.subject ~
" | " ~ item.text] }}`` failed with "'dict object' has no attribute '<the row's subject |
its text>'", and a KeyError or ValueError of a computed format quotes what it was given.
So a looked-up key is quoted only when the template's source writes it (the author's own
text: a typo such as ``item.subjet``), and another exception is named by its type, its
message kept only in the few shapes that name types alone (``'<' not supported between
instances of 'str' and 'int'``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from contextvars import ContextVar
from functools import lru_cache
from typing import Any

from jinja2 import StrictUndefined, TemplateSyntaxError, Undefined, meta, nodes
from jinja2.compiler import CodeGenerator
from jinja2.exceptions import SecurityError, UndefinedError
from jinja2.runtime import missing
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import object_type_repr

MAX_OUTPUT = 1_000_000  # characters one operator may produce ('a' * 10**9 is refused)
MAX_POWER = 10_000
MAX_DEPTH = 20  # a template's syntax tree, at most this deep...
MAX_NODES = 5_000  # ...with at most this many nodes: compiling it stays cheap


class _GateSandbox(ImmutableSandboxedEnvironment):
    """The sandbox with no globals (only ``item`` exists) and a size cap on ``*`` and ``**``,
    so a template cannot make a worker allocate gigabytes."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context, operator, left, right):
        if operator == "**":
            if isinstance(right, (int, float)) and abs(right) > MAX_POWER:
                raise SecurityError(_Shown(f"an exponent over {MAX_POWER} is too large"))
            return left**right
        for seq, times in ((left, right), (right, left)):
            if isinstance(seq, (str, list, tuple)) and isinstance(times, int):
                if len(seq) * max(times, 0) > MAX_OUTPUT:
                    raise SecurityError(_Shown("repetition result is too large"))
        return left * right


class _Shown(str):
    """A render problem's message that quotes nothing of the item (``render`` shows it)."""


# What the template being rendered writes itself (``_literals``): the keys a problem may quote.
_WRITTEN: ContextVar[frozenset] = ContextVar("template_literals", default=frozenset())


class _ItemUndefined(StrictUndefined):
    """StrictUndefined whose message quotes the key looked up only when the template writes
    it (``_WRITTEN``); a key the template computed, from the item or not, is not shown."""

    __slots__ = ()

    @property
    def _undefined_message(self) -> str:
        obj, name, hint = self._undefined_obj, self._undefined_name, self._undefined_hint
        if hint and (obj is missing or name is None):
            return _Shown(hint)  # Jinja's own words ("No first item, sequence was empty.")
        shown = _quoted(name)
        if obj is missing:
            return _Shown(f"{shown} is undefined")
        if hint:  # the sandbox's refusal of an unsafe attribute
            return _Shown(f"access to attribute {shown} of {type(obj).__name__!r} object is unsafe")
        if not isinstance(name, str):
            return _Shown(f"{object_type_repr(obj)} has no element {shown}")
        return _Shown(f"{object_type_repr(obj)!r} has no attribute {shown}")


def _quoted(key: Any) -> str:
    try:
        written = key in _WRITTEN.get()
    except TypeError:  # unhashable
        written = False
    return repr(key)[:200] if written else "(a key the template computed: not shown, it may hold the item's values)"


_ENV = _GateSandbox(undefined=_ItemUndefined, autoescape=False, keep_trailing_newline=True)
_ENV.globals.clear()
ALLOWED_NAMES = frozenset({"item"})


class TemplateProblem(ValueError):
    """Why a template cannot be used; the caller adds file and field."""


def check_template(source: str, names: frozenset[str] = ALLOWED_NAMES) -> int:
    """Refuse, before anything is stored, a template that is malformed, too deep or too big
    to compile cheaply (Jinja's optimizer costs grow with the square of a chain's depth:
    300 lookups 100 deep took 86 s), or that reaches beyond ``item``. Returns its number
    of nodes (a prompt's messages share ``MAX_NODES``). ``names``: the names it may read (a
    judge's templates also read the answer they grade, ``gate.prompt.judge``)."""
    try:
        ast = _ENV.parse(source)
    except TemplateSyntaxError as exc:
        raise TemplateProblem(f"template syntax error on line {exc.lineno}: {exc.message}") from None
    except RecursionError:
        raise TemplateProblem(f"template nests expressions too deeply to parse (at most {MAX_DEPTH} levels)") from None
    except Exception as exc:  # TypeError, OverflowError...
        raise TemplateProblem(f"template cannot be parsed: {type(exc).__name__}") from None
    count = _check_shape(ast)
    try:
        unknown = _names_read(ast) - names
    except Exception as exc:  # nothing under the shape limits raises here; no traceback if it did
        raise TemplateProblem(f"template cannot be checked: {type(exc).__name__}") from None
    if unknown:
        available = " and ".join(repr(n) for n in sorted(names)) + (" is" if len(names) == 1 else " are")
        raise TemplateProblem(f"template uses {', '.join(sorted(unknown))}; only {available} available")
    for node in ast.find_all((nodes.Getattr, nodes.Getitem, nodes.Filter)):
        if isinstance(node, nodes.Getattr):
            attrs = [node.attr]
        elif isinstance(node, nodes.Getitem):
            attrs = [_const(node.arg)]
        else:  # |attr('x') reaches attributes by name
            assert isinstance(node, nodes.Filter)  # find_all yields only the kinds it is asked for
            attrs = [_const(a) for a in node.args] if node.name == "attr" else []
        for attr in attrs:
            if isinstance(attr, str) and attr.startswith("_"):
                raise TemplateProblem(
                    f"template reaches for private attribute {attr!r}; only item fields are available"
                )
    for _ in ast.find_all((nodes.Import, nodes.FromImport, nodes.Include, nodes.Extends)):
        raise TemplateProblem("template may not import, include or extend other templates")
    return count


class _NamesRead(meta.TrackingCodeGenerator):
    """``meta.find_undeclared_variables`` without evaluating anything. Jinja's compiler folds
    what is constant: it runs a filter, a test or an operator on constants (its optimizer,
    an output's constant parts, an ``{% autoescape %}`` value), so the check of a 40-byte
    template (``'a'|center(10**10)``, ``'%10000000000s' % 'x'``) made this process allocate
    gigabytes. Nothing here is folded: every expression counts as known only when it runs."""

    def __init__(self, environment) -> None:
        CodeGenerator.__init__(self, environment, "<introspection>", "<introspection>", optimized=False)
        self.undeclared_identifiers: set[str] = set()

    def _output_child_to_const(self, node, frame, finalize):
        raise nodes.Impossible()

    def visit_EvalContextModifier(self, node, frame) -> None:
        for keyword in node.options:
            self.visit(keyword.value, frame)
        frame.eval_ctx.volatile = True


def _names_read(ast: nodes.Template) -> set[str]:
    """The names a template reads that it does not set itself."""
    tracker = _NamesRead(ast.environment)
    tracker.visit(ast)
    return tracker.undeclared_identifiers


def names_read(source: str) -> set[str]:
    """The names a checked template reads that it does not set (``item``, a judge's answers)."""
    return _names_read(_ENV.parse(source))


def _check_shape(ast: nodes.Template) -> int:
    """At most ``MAX_NODES`` nodes, nested at most ``MAX_DEPTH`` deep (counted without
    recursion); returns the count."""
    count = 0
    stack: list[tuple[nodes.Node, int]] = [(ast, 1)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if depth > MAX_DEPTH:
            raise TemplateProblem(f"template nests expressions deeper than {MAX_DEPTH} levels")
        if count > MAX_NODES:
            raise TemplateProblem(f"template has more than {MAX_NODES} expressions and tags")
        stack.extend((child, depth + 1) for child in node.iter_child_nodes())
    return count


def parse_template(source: str) -> nodes.Template:
    """The template's syntax tree (TemplateSyntaxError when it has none)."""
    return _ENV.parse(source)


def _const(node: nodes.Node) -> Any:
    return node.value if isinstance(node, nodes.Const) else None


@lru_cache(maxsize=512)
def _compiled(source: str):
    return _ENV.from_string(source)


def render(source: str, item: Mapping[str, Any], variables: Mapping[str, str] | None = None) -> str:
    """Render one template over one dataset item (and a judge's ``variables``: the answers
    it grades, strings); problems become TemplateProblem, whose message quotes nothing of
    the item (the module's docstring). MemoryError and RecursionError are the sandbox's to
    tell (an item over its budget)."""
    written = _WRITTEN.set(_literals(source))
    try:
        return _compiled(source).render(**(variables or {}), item=item)
    except (UndefinedError, SecurityError) as exc:
        said = exc.message if isinstance(exc.message, _Shown) else "an operation it does not allow"
        if isinstance(exc, SecurityError):
            raise TemplateProblem(f"template refused by the sandbox: {said}") from None
        raise TemplateProblem(f"template refers to a missing item field: {said}") from None
    except TemplateSyntaxError as exc:
        raise TemplateProblem(f"template syntax error on line {exc.lineno}: {exc.message}") from None
    except (MemoryError, RecursionError):
        raise
    except Exception as exc:  # a TypeError comparing a text with a number, a KeyError of a format...
        raise TemplateProblem(unrenderable(exc)) from None
    finally:
        _WRITTEN.reset(written)


@lru_cache(maxsize=512)
def _literals(source: str) -> frozenset:
    """What the template's source writes that a lookup may use as a key: its constants,
    the names after its dots and its variables' names."""
    try:
        tree = _ENV.parse(source)
    except Exception:  # not a template: nothing of it is quoted
        return frozenset()
    found = {node.attr for node in tree.find_all(nodes.Getattr)} | {node.name for node in tree.find_all(nodes.Name)}
    for node in tree.find_all(nodes.Const):
        try:
            found.add(node.value)
        except TypeError:  # unhashable
            continue
    return frozenset(found)


# Messages of the exceptions a render raises that name types and operators only.
_TYPES_ONLY = re.compile(
    r"'(<|<=|>|>=)' not supported between instances of '\w+' and '\w+'"
    r"|unsupported operand type\(s\) for [^\w\s'\"]{1,3}: '\w+' and '\w+'"
    r"|can only concatenate \w+ \(not \"\w+\"\) to \w+"
    r"|'\w+' object is not (iterable|callable|subscriptable)"
    r"|object of type '\w+' has no len\(\)"
    r"|'in <string>' requires string as left operand, not \w+"
    r"|(float |integer )?(division|modulo)( or modulo)? by zero"
)


def unrenderable(exc: Exception) -> str:
    """Why a template could not render an item, from an exception rendering raised: its
    type, and its message only when that names types alone (a KeyError or ValueError of a
    computed format quotes what it was given: the item's values)."""
    message = str(exc)
    if _TYPES_ONLY.fullmatch(message):
        return f"template cannot render this item: {type(exc).__name__}: {message}"
    return f"template cannot render this item: {type(exc).__name__} (its message is not shown: it may quote the item)"


# --- plain templates, without Jinja's per-render machinery ------------------------------

_FALLBACK = object()
# what a plain template's lookups start from: the item, and the answers a judge's templates
# read (gate.prompt.judge; a template of another prompt naming them is refused at submit)
PLAIN_ROOTS = frozenset({"item", "answer", "answer_a", "answer_b"})


def render_plain(source: str, item: Mapping[str, Any], variables: Mapping[str, str] | None = None) -> str:
    """``render(source, item)`` for a plain template (text and ``item.a`` / ``item['a']``
    lookups, ``gate.prompt.sandbox.plain_lookups``), with the sandbox's own ``getattr`` and
    ``getitem`` and ``str`` of each value, as Jinja's compiled template does, but without a
    new render context per item (two thirds of rendering a chunk: bench/README.md, the
    database path). A lookup that finds nothing, or anything unusual, renders through
    Jinja instead, so errors read exactly as Jinja says them."""
    parts = _plain_parts(source)
    if parts is None:
        return render(source, item, variables)
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
            continue
        root, path = part
        value: Any  # whatever an item's data holds
        if root == "item":
            value = item
        else:
            value = (variables or {}).get(root, _FALLBACK)
        if value is _FALLBACK:  # an answer the judge reads that it was not given: as Jinja says it
            return render(source, item, variables)
        for is_attr, key in path:
            value = _ENV.getattr(value, key) if is_attr else _ENV.getitem(value, key)
            if isinstance(value, Undefined):
                return render(source, item, variables)
        out.append(str(value))
    return "".join(out)


@lru_cache(maxsize=512)
def _plain_parts(source: str) -> tuple | None:
    """The template as text pieces and lookup paths ((is_attr, key), ...) from ``item``;
    None unless it is exactly that (then ``render_plain`` hands it to Jinja)."""
    try:
        tree = _ENV.parse(source)
    except Exception:
        return None
    parts: list = []
    for output in tree.body:
        if not isinstance(output, nodes.Output):
            return None
        for node in output.nodes:
            if isinstance(node, nodes.TemplateData):
                parts.append(node.data)
            elif (path := _lookup_path(node)) is not None:
                parts.append(path)
            else:
                return None
    return tuple(parts)


def _lookup_path(node: nodes.Node) -> tuple | None:
    steps = []
    while isinstance(node, (nodes.Getattr, nodes.Getitem)):
        if isinstance(node, nodes.Getattr):
            steps.append((True, node.attr))
        elif isinstance(node.arg, nodes.Const):
            steps.append((False, node.arg.value))
        else:
            return None
        node = node.node
    if not (isinstance(node, nodes.Name) and node.name in PLAIN_ROOTS and node.ctx == "load"):
        return None
    return node.name, tuple(reversed(steps))
