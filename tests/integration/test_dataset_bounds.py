"""What a dataset file may cost (issue 33, finding 3): a CSV header's names are repeated in
every row's stored JSON, so one 65,000-character name made each 14-byte row store 65 KB,
and a page of 5,000 such rows held 320 MB. Column names are capped, and pages are sized by
bytes, the first one too."""

from __future__ import annotations

import io

import pytest
from sqlalchemy import text

from gate.errors import DatasetError
from gate.importer import read_pages
from gate.service import Gate
from gate.sources import SourceOptions
from gate.sources.upload import UploadReader

PAGE_BYTES = 4 << 20  # the default
WIDE = 332  # columns of 191-character names: each row's JSON just under 64 KiB


def wide_header_csv(rows: int) -> bytes:
    """The widest header that still passes: WIDE names of 191 characters, empty cells."""
    names = ",".join(f"{n:03d}" + "c" * 188 for n in range(WIDE))
    lines = "".join(f"i{i},yes" + "," * WIDE + "\n" for i in range(rows))
    return f"item_id,expected_decision,{names}\n{lines}".encode()


def long_name_csv(rows: int) -> bytes:
    return ("item_id,expected_decision," + "c" * 65000 + "\n" + "".join(f"i{i},yes,\n" for i in range(rows))).encode()


def counts(gate: Gate) -> tuple[int, int, int]:
    with gate.engine.connect() as conn:
        return tuple(
            conn.execute(text(f"SELECT COUNT(*) FROM {table}")).scalar()
            for table in ("dataset", "dataset_version", "dataset_row")
        )


def test_a_column_name_over_191_characters_is_refused_in_one_line(service):
    reader = UploadReader(io.BytesIO(long_name_csv(1000)), "d.csv", SourceOptions())
    with pytest.raises(DatasetError) as err:
        next(read_pages(reader, 5000, PAGE_BYTES))
    message = str(err.value)
    assert "line 1: a column name is 65000 characters long" in message and "at most 191" in message, message
    assert "\n" not in message and len(message) < 200
    fine = ("item_id,expected_decision," + "c" * 191 + "\na,yes,x\n").encode()
    assert next(read_pages(UploadReader(io.BytesIO(fine), "d.csv", SourceOptions()), 5000, PAGE_BYTES))
    with service.client("admin") as admin:
        sent = admin.put("/v1/datasets/d/rows", content=long_name_csv(1000), params={"path": "d.csv"})
        assert sent.status_code == 400 and "at most 191" in sent.json()["error"], sent.text
        assert admin.get("/v1/datasets/d/versions").status_code == 404  # nothing stored, nothing registered


def test_every_page_of_a_wide_header_holds_about_page_bytes_the_first_one_too():
    """The importer asked for 5,000 rows first whatever their width; the reader now ends a
    page once its lines and the names each row repeats come to page_bytes."""
    reader = UploadReader(io.BytesIO(wide_header_csv(300)), "d.csv", SourceOptions())  # page_bytes: 4 MiB
    pages = [sum(len(r.input_json) for r in page) for page in read_pages(reader, 5000, PAGE_BYTES)]
    row = WIDE * (191 + 5) + WIDE - 1 + 2  # one row's JSON: "name":"" per column, commas, braces
    assert sum(pages) == 300 * row and len(pages) >= 4, pages
    assert max(pages) <= PAGE_BYTES + row, pages  # about page_bytes: one row more at most
