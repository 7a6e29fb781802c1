"""The column types the schema declares that each dialect stores its own way: JSON as text,
an exact bar, a decision that may be a fields decision's canonical JSON."""

from __future__ import annotations

import json
from decimal import Decimal

from sqlalchemy import String, Text
from sqlalchemy.dialects import mysql
from sqlalchemy.types import TypeDecorator


class JsonText(TypeDecorator):
    """JSON as text: ``LONGTEXT`` on MySQL, ``TEXT`` on SQLite."""

    impl = Text
    cache_ok = True

    def load_dialect_impl(self, dialect):
        return dialect.type_descriptor(mysql.LONGTEXT() if dialect.name == "mysql" else Text())

    def process_bind_param(self, value, dialect):
        return None if value is None else json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    def process_result_value(self, value, dialect):
        return None if value is None else json.loads(value)


class Bar(TypeDecorator):
    """An accuracy bar as an exact Decimal (``DECIMAL(10,9)`` on MySQL, text on SQLite)."""

    impl = Text
    cache_ok = True

    def load_dialect_impl(self, dialect):
        return dialect.type_descriptor(mysql.DECIMAL(10, 9) if dialect.name == "mysql" else Text())

    def process_bind_param(self, value, dialect):
        return None if value is None else str(Decimal(str(value)))

    def process_result_value(self, value, dialect):
        return None if value is None else Decimal(str(value)).normalize()


class LabelText(TypeDecorator):
    """An expected or read decision: a label, or a fields decision's canonical JSON
    (``gate.prompt.structured``): ``MEDIUMTEXT`` on MySQL since migration 0014; SQLite does not
    bound its ``VARCHAR(128)``, so that column was left as declared."""

    impl = Text
    cache_ok = True

    def load_dialect_impl(self, dialect):
        return dialect.type_descriptor(mysql.MEDIUMTEXT() if dialect.name == "mysql" else String(128))
