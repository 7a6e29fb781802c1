"""What the service reads for a caller (gate/service/dataset_access.py) and what it shows of a
source: no file, environment or driver option of the server's; no password."""

from __future__ import annotations

import pytest

from gate.service.dataset_access import remote_source_problem, scrubbed


@pytest.mark.parametrize(
    "source, why",
    [
        ("/etc/passwd", "no file"),
        ("file:///etc/passwd", "no file"),
        ("data/x.csv", "no file"),
        ("sql+sqlite:////srv/gate.db?query=SELECT+1", "no file"),
        ("https://h.example/x.csv?t=${OPENAI_API_KEY}", "environment"),
        ("sql+postgresql://u:${PG_PASSWORD}@h/db?query=SELECT+1", "environment"),
        ("sql+mysql+pymysql://u@h/db?query_file=/etc/hostname", "'query_file'"),
        ("sql+mysql+pymysql://u@h/db?query=SELECT+1&local_infile=1", "'local_infile'"),
        ("sql+mysql+pymysql://u@h/db?query=SELECT+1&read_default_file=/root/.my.cnf", "'read_default_file'"),
    ],
)
def test_sources_that_would_read_the_servers_things_are_refused(source, why):
    assert why in (remote_source_problem(source) or "")


@pytest.mark.parametrize(
    "source",
    [
        "https://h.example/x.csv",
        "s3://bucket/key.jsonl",
        "sql+postgresql://reader:pw@h/db?query=SELECT+1&sslmode=require",
    ],
)
def test_sources_the_service_fetches_itself_are_taken(source, monkeypatch):
    monkeypatch.setenv("PROMPTGATE_SOURCE_S3_BUCKETS", "bucket")  # an s3 bucket the operator lists
    assert remote_source_problem(source) is None


def test_what_any_caller_sees_of_a_source_has_no_password_nor_folder():
    shown = scrubbed(
        [
            {
                "dataset": {
                    "source_uri": "sql+postgresql://reader:s3cret@h/db?query=SELECT+1",
                    "options": {"id_column": "id", "base_dir": "/srv/gate"},
                },
                "versions": [{"source_uri": "https://u:tok@h/x.csv", "source_options": {"base_dir": "/x"}}],
            }
        ]
    )
    assert "s3cret" not in str(shown) and "tok@" not in str(shown) and "/srv/gate" not in str(shown)
    assert shown[0]["dataset"]["options"] == {"id_column": "id"}
    assert shown[0]["dataset"]["source_uri"] == "sql+postgresql://reader:***@h/db?query=SELECT+1"
