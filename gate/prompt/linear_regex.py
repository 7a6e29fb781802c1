"""Decision regexes run on RE2, a linear-time engine.

A prompt's ``decision: {type: regex, pattern: ...}`` comes from a pull request, and the
text it runs on comes from the model. Python's backtracking ``re`` lets a pattern such as
``^(a+)+$`` take exponential time on a long answer, inside C code that holds the GIL: a
worker froze for minutes, deaf to SIGTERM. RE2 (``google-re2``) matches in time linear in
the text, whatever the pattern, and bounds the memory a compiled pattern may use; the
price is the syntax it refuses (backreferences, lookaround), which a label-reading
pattern does not need. That is refused when the prompt is submitted, with RE2's reason.

Linear is not yet cheap: RE2 runs a lazily built DFA while its states fit in ``max_mem``
and otherwise falls back to an NFA whose cost is text length × program size. A pattern
such as ``((a|b){0,100}){9}c`` compiles to ~3,600 instructions and took 2 s on one 32 KiB
answer. Measured on the answer cap (bench/README.md, "decision patterns"), patterns up to
~900 instructions stay on the DFA and take under 10 ms; the cliff is just above 1,000. So
a pattern's compiled program is capped at ``MAX_PROGRAM_SIZE``: a label-reading pattern is
a few dozen instructions.
"""

from __future__ import annotations

from functools import lru_cache

import re2

MAX_PATTERN_CHARS = 1000
MAX_PROGRAM_BYTES = 1 << 20  # RE2's own cap on a compiled pattern's memory
MAX_PROGRAM_SIZE = 800  # instructions; below RE2's DFA-to-NFA cliff on 32 KiB


class PatternError(ValueError):
    """A pattern RE2 cannot take; the message says why in one line."""


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # RE2 would also print the error to stderr
    options.max_mem = MAX_PROGRAM_BYTES
    return options


@lru_cache(maxsize=256)
def compile_pattern(pattern: str):
    """The compiled pattern (cached), or PatternError."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternError(f"longer than {MAX_PATTERN_CHARS} characters")
    try:
        compiled = re2.compile(pattern, _options())
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise PatternError(f"{reason} (decision patterns use RE2 syntax: no backreferences or lookaround)") from None
    if compiled.programsize > MAX_PROGRAM_SIZE:
        raise PatternError(
            f"too complex: compiles to {compiled.programsize} instructions, the "
            f"limit is {MAX_PROGRAM_SIZE} (narrow the repetition counts)"
        )
    return compiled
