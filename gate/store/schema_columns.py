"""What every table of the gate database is built from (``gate.store.schema``): the one
``MetaData``, the epoch, and the column types and keys the tables share."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import CHAR, BigInteger, Column, DateTime, Integer, MetaData
from sqlalchemy.dialects import mysql

# A time far in the past: "visible now" for new items and released runs, "not paused" for
# a new rate-limit bucket. The one epoch: every other form (a SQL text literal) derives from it.
EPOCH = datetime(2000, 1, 1)

meta = MetaData()
T = DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql")  # a time: UTC, microseconds
FLAG = Integer().with_variant(mysql.TINYINT(), "mysql")  # 0 or 1
HASH = CHAR(64)  # a SHA-256, hex
TOKEN = CHAR(32)  # a lease token (``new_token``)
NOT_NULL: dict[str, Any] = {"nullable": False}  # typed Any: Column takes it as **kwargs
NEVER_LEASED = str(EPOCH)  # EPOCH as the DDL's default: 2000-01-01 00:00:00


def id_column() -> Column:
    """The surrogate key: BIGINT AUTO_INCREMENT on MySQL, INTEGER PRIMARY KEY (the rowid) on SQLite."""
    return Column("id", BigInteger, primary_key=True, autoincrement=True)
