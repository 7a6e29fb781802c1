"""What a dataset file may cost (issue 33, finding 3): a CSV header's names are repeated in
every row's stored JSON, so one 65,000-character name made each 14-byte row store 65 KB,
and a page of 5,000 such rows held 320 MB. Column names are capped, pages are sized by
bytes (the first one too), and a version stores at most PROMPTGATE_MAX_VERSION_BYTES, in
an import and in a pull request's dry run alike."""

from __future__ import annotations

import io

import pytest
from sqlalchemy import text
from support.helpers import write_csv

from gate.datasets.importer import read_pages
from gate.datasets.sources import SourceOptions
from gate.datasets.sources.upload import UploadReader
from gate.domain import Gate
from gate.errors import DatasetError

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


def test_a_version_over_the_stored_byte_cap_is_refused_naming_the_setting_and_leaves_nothing(gate, tmp_path):
    capped = Gate(gate.engine, gate.settings.with_(max_version_bytes=20_000, page_size=50))
    small, large = write_csv(tmp_path / "small.csv", 20), write_csv(tmp_path / "large.csv", 2000)
    before = counts(gate)
    with pytest.raises(DatasetError) as err:  # a new dataset: pages were written before the cap was met
        capped.register_dataset("big", str(large))
    message = str(err.value)
    assert "dataset big: its rows come to more than 20000 bytes as stored" in message, message
    assert "PROMPTGATE_MAX_VERSION_BYTES" in message and "\n" not in message
    assert counts(gate) == before  # no dataset, no version, no row left
    capped.register_dataset("d", str(small))
    current, kept = capped.dataset_version("d").id, counts(gate)
    (tmp_path / "small.csv").write_bytes(large.read_bytes())
    with pytest.raises(DatasetError, match="PROMPTGATE_MAX_VERSION_BYTES"):
        capped.refresh_dataset("d")
    assert capped.dataset_version("d").id == current and counts(gate) == kept
    with pytest.raises(DatasetError, match="PROMPTGATE_MAX_VERSION_BYTES"):  # a dry run reads no more
        capped.diff_source("d", str(large), {})


def test_a_wide_header_dry_run_costs_bounded_memory_and_stops_at_the_cap(mysql_url, tmp_path):
    """Hostile review: a submit token's dry run of a 150 KB file raised the server's RSS by
    121 MiB (four at once: 284 to 1,340 MiB). A dry run of the widest header allowed now
    holds a page of about 4 MiB of rows; one whose rows would be over the version cap is
    refused there, so its CPU is bounded by the cap, not by the upload."""
    from support.service_harness import Service

    service = Service(mysql_url, tmp_path, env={"PROMPTGATE_MAX_VERSION_BYTES": str(128 << 20)})
    try:
        with service.client("admin") as admin:
            made = admin.put(
                "/v1/datasets/d/rows",
                content=b"item_id,expected_decision,text\na,yes,x\n",
                params={"path": "d.csv", "declared_in": "gate.yaml"},
            )
            assert made.status_code == 200, made.text
        status_file = f"/proc/{service.proc.pid}/status"
        with service.client("submit", timeout=120) as ci:
            rss = _kib(status_file, "VmRSS")
            with open(f"/proc/{service.proc.pid}/clear_refs", "w") as clear:
                clear.write("5")  # the peak starts again from here
            shown = ci.put("/v1/datasets/d/rows", content=wide_header_csv(1500), params={"path": "d.csv", "dry_run": 1})
            assert shown.status_code == 200 and shown.json()["added"] == 1500, shown.text  # 98 MB of rows
            grew = (_kib(status_file, "VmHWM") - rss) / 1024
            print(f"peak RSS grew by {grew:.1f} MiB")
            assert grew < 40, f"the dry run raised the peak RSS by {grew:.0f} MiB"
            over = ci.put("/v1/datasets/d/rows", content=wide_header_csv(2500), params={"path": "d.csv", "dry_run": 1})
            assert over.status_code == 400 and "PROMPTGATE_MAX_VERSION_BYTES" in over.json()["error"], over.text
    finally:
        service.stop()


def _kib(status_file: str, field: str) -> int:
    with open(status_file) as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(field + ":"))


def test_a_dry_run_holds_a_long_label_by_its_digest(gate, tmp_path):
    """Hostile review of this change: a dry run held each proposed row's label whole, so a
    file of 4 KB labels cost its own size in the server's memory (+115 MiB of RSS for a
    96 MiB upload). A label over 191 characters is held, compared and shown by its start
    and a digest: a changed one is still a relabel."""
    import tracemalloc

    long = "L" * 4000
    (tmp_path / "d.csv").write_text(f"item_id,expected_decision,text\na,{long}x,t\n")
    gate.register_dataset("d", str(tmp_path / "d.csv"))
    proposed = tmp_path / "pr.csv"
    proposed.write_text(
        f"item_id,expected_decision,text\na,{long}y,t\n" + "".join(f"n{i},{long}{i},t\n" for i in range(20_000))
    )
    tracemalloc.start()
    try:
        diff = gate.diff_source("d", str(proposed), {})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (diff.added, diff.relabelled, diff.removed) == (20_000, 1, 0)
    assert peak < 32 << 20, f"the dry run's peak: {peak >> 20} MiB for {len(long) * 20_000 >> 20} MiB of labels"
    (shown,) = diff.examples["relabelled"]
    assert len(shown) < 300 and "sha256" in shown, shown[:300]
