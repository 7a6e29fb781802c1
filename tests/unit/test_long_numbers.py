"""A number too long for Python to read, in a JSON body (``gate.service.body_limits``) or a YAML
file (``gate.prompt.yaml_file``): refused in one line of the gate's own, never with Python's hint
about its internals (``sys.set_int_max_str_digits``)."""

from __future__ import annotations

import pytest

from gate.errors import SpecError
from gate.prompt.yaml_file import parse_yaml
from gate.service.body_limits import JsonRefused, strict_json


def test_a_json_number_longer_than_a_hundred_characters_is_refused_in_one_line():
    assert strict_json('{"n": ' + "9" * 100 + ', "f": 0.' + "5" * 98 + "}")["n"] == int("9" * 100)
    for number in ("9" * 101, "-" + "9" * 100, "9" * 100_000, "0." + "5" * 99, "1" * 60 + "e" + "1" * 60):
        with pytest.raises(JsonRefused, match="^the JSON body has a number of more than 100 digits$"):
            strict_json('{"n": ' + number + "}")


def test_a_yaml_number_longer_than_a_hundred_characters_is_refused_with_its_line():
    assert parse_yaml("a: " + "9" * 100 + "\nb: 0x1f\nc: 1.5\n", "p.yaml") == {"a": int("9" * 100), "b": 31, "c": 1.5}
    for text in ("a: " + "9" * 100_000, "a:\n  - -" + "9" * 100, "a: 0." + "5" * 99, "a: 0x" + "f" * 99):
        with pytest.raises(SpecError) as refused:
            parse_yaml(text, "p.yaml")
        assert str(refused.value).endswith("a number longer than 100 characters"), str(refused.value)
        assert "set_int_max_str_digits" not in str(refused.value)
