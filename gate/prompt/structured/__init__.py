"""Structured answers: a prompt that extracts several values (an order id, a category, an
amount) is decided field by field (``decision: {type: fields, fields: {...}}``).

* ``rule``      the rule as a prompt file declares it: each field and its comparator
                (exact, label, number, text, list), parsed and bounded;
* ``reading``   an answer read as a JSON object, the declared fields kept as canonical
                JSON (what ``actual_decision`` stores, and what reuse reads again);
* ``compare``   what was read held against an item's expected object: the item's verdict
                and which fields were wrong or missing (bit masks, by field name order);
* ``expected``  the dataset side: an ``expected`` object (JSONL) or ``expected.<field>``
                columns (CSV) read at import, checked row against row, summarised with
                the version, and held against a rule at submit;
* ``samples``   the wrong fields of an item a report lists.

This package imports nothing of the gate's database; ``rule`` imports nothing of the
gate's at all, so the prompt format (``gate.prompt.spec``) can use it.
"""
