"""Commands over datasets and their bars: add, refresh, map and unmap, list, preview, the
versions of one and the difference between two."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, cast

import click

from gate.errors import UsageError
from gate.untrusted import terminal_safe

from .common import database_option, echo_json, is_remote, open_gate

if TYPE_CHECKING:
    from gate.client.remote import RemoteGate


@click.group()
def dataset():
    """Register datasets and map them to prompts with accuracy bars."""


@dataset.command("add")
@database_option
@click.argument("name")
@click.option(
    "--source",
    "source_uri",
    required=True,
    metavar="URI",
    help="path or file:// (CSV/JSONL), https://, s3://bucket/key, sql+URL?query=...",
)
@click.option("--id-column", default=None, help="Column holding the item id (default item_id).")
@click.option("--label-column", default=None, help="Column holding the expected label (default expected_decision).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def dataset_add(ctx, name, source_uri, id_column, label_column, as_json):
    """Register dataset NAME (or point it at a new source) and import its rows as its
    current version."""
    gate = open_gate(ctx)
    ds = gate.register_dataset(name, source_uri, id_column=id_column, label_column=label_column)
    _echo_dataset(ds, gate.dataset_version(name), as_json)


@dataset.command("refresh")
@database_option
@click.argument("name")
@click.option(
    "--file",
    "file",
    default=None,
    type=click.Path(dir_okay=False),
    metavar="PATH",
    help="With --gate-url: upload this file's rows (a dataset registered from an upload).",
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def dataset_refresh(ctx, name, file, as_json):
    """Import dataset NAME's source again: a new version when its rows changed. Runs
    already submitted keep the version they pinned. Through the service (--gate-url), a
    dataset registered from an upload is refreshed by uploading its file again (--file)."""
    gate = open_gate(ctx)
    if file is not None and not is_remote(gate):
        raise UsageError(
            "--file uploads a file to the gate's service: give --gate-url (on the database, "
            "`dataset add NAME --source PATH` re-reads a file)"
        )
    # --file: the service's RemoteGate (refused above otherwise)
    ds, _ = (
        cast("RemoteGate", gate).refresh_dataset(name, file=file) if file is not None else gate.refresh_dataset(name)
    )
    _echo_dataset(ds, gate.dataset_version(name), as_json)


def _echo_dataset(ds, version, as_json: bool) -> None:
    if as_json:
        echo_json(
            {
                "id": ds.id,
                "name": ds.name,
                "source_uri": ds.source_uri,
                "options": ds.options,
                "version": _version_json(version, ds.current_version_id),
            }
        )
    else:
        click.echo(
            f"dataset {ds.name}: {terminal_safe(ds.source_uri)}, version {version.label} "
            f"({version.row_count} rows, {version.content_hash[:12]})"
        )


def _version_json(v, current_id) -> dict:
    return {
        "id": v.id,
        "number": v.number,
        "content_hash": v.content_hash,
        "rows": v.row_count,
        "labels": v.labels,
        "source_uri": v.source_uri,
        "source_version": v.source_version,
        "created_at": v.created_at,
        "current": v.id == current_id,
        **_provenance(v),
    }


def _provenance(v) -> dict:
    """Where an uploaded version's rows came from: the file's path in the repository and
    the commit (empty for a source the gate reads itself)."""
    options = v.source_options or {}
    return {k: options[key] for k, key in (("path", "upload_path"), ("commit", "upload_commit")) if options.get(key)}


def _source_text(v) -> str:
    commit = (v.source_options or {}).get("upload_commit")
    return terminal_safe(v.source_uri, 80) + (f" @ {terminal_safe(str(commit)[:12])}" if commit else "")


@dataset.command("versions")
@database_option
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def dataset_versions(ctx, name, as_json):
    """The versions of dataset NAME, newest first: hash, rows, labels, source, created,
    and which is current (what new submissions pin)."""
    ds, versions = open_gate(ctx).dataset_versions(name)
    if as_json:
        echo_json([_version_json(v, ds.current_version_id) for v in versions])
        return
    for v in versions:
        labels = ", ".join(f"{terminal_safe(label, 40)} {n}" for label, n in sorted(v.labels.items()))
        mark = "*" if v.id == ds.current_version_id else " "
        assert v.content_hash is not None  # only READY versions are listed: store.versions.finish_version hashed each
        click.echo(
            f"{mark} {v.label}	{v.content_hash[:12]}	{v.row_count} rows	{labels}	"
            f"{_source_text(v)}	{v.created_at:%Y-%m-%d %H:%M:%S}"
        )


@dataset.command("diff")
@database_option
@click.argument("name")
@click.argument("old")
@click.argument("new")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def dataset_diff(ctx, name, old, new, as_json):
    """How version NEW of dataset NAME differs from version OLD: rows added, removed,
    relabelled, and rows whose input changed. A version is v3 (the dataset's third, as
    `dataset versions` shows it) or a version id (12)."""
    gate = open_gate(ctx)
    d = gate.diff_versions(name, old, new)
    if as_json:
        echo_json(
            {
                "added": d.added,
                "removed": d.removed,
                "relabelled": d.relabelled,
                "changed": d.changed,
                "examples": d.examples,
            }
        )
        return
    click.echo(
        f"{name} {gate.dataset_version(name, old).label} → {gate.dataset_version(name, new).label}: {d.summary()}"
    )
    for kind, examples in d.examples.items():
        if examples:
            click.echo(f"  {kind}: {terminal_safe(', '.join(examples), 300)}")


@dataset.command("map")
@database_option
@click.argument("prompt")
@click.argument("dataset_name", metavar="DATASET")
@click.option("--min-accuracy", required=True, help="The bar, a fraction in [0, 1] (0.95 = 95%).")
@click.option(
    "--max-broken",
    metavar="N",
    default=None,
    help="At most N items the live version answers right and the candidate wrong (0: no regression).",
)
@click.option("--min-recall", metavar="LABEL=X", multiple=True, help="Recall of LABEL at least X (repeatable).")
@click.option("--min-precision", metavar="LABEL=X", multiple=True, help="Precision of LABEL at least X (repeatable).")
@click.option("--max-latency-p95-ms", metavar="N", default=None, help="The 95th percentile call latency, in ms.")
@click.option("--max-cost-per-1k-items", metavar="USD", default=None, help="The cost of 1000 items, in US dollars.")
@click.option(
    "--max-drop",
    metavar="PTS",
    default=None,
    help="Non-inferiority against live: the lower end of the paired difference's interval (candidate − live "
    "on the same items) at least −PTS accuracy points (2 = two points).",
)
@click.option("--confidence", metavar="X", default=None, help="The confidence of that interval (default 0.95).")
@click.option(
    "--max-error-rate",
    metavar="X",
    default=None,
    help="The share of items that may end in an error (unscorable) with the run still judged on the items "
    "scored, a fraction below 1 (default 0: one error fails the update).",
)
@click.option(
    "--early-stop/--no-early-stop",
    default=True,
    show_default=True,
    help="Stop calling the model once no outcome of the remaining items could clear the bars.",
)
@click.option(
    "--judge-corrected",
    is_flag=True,
    default=None,
    help="A judged prompt: bar the pass rate corrected for the judge's own error rates, not the one as judged.",
)
@click.option("--max-loss-rate", metavar="X", default=None, help="A comparison with live: at most this share lost.")
@click.option(
    "--max-inconsistent",
    metavar="X",
    default=None,
    help="A comparison with live: at most this share position-inconsistent, else inconclusive (0.10).",
)
@click.option(
    "--sentinels",
    metavar="N",
    type=int,
    default=None,
    help="A judged prompt: the judge's labelled items mixed in over the run, for its drift test (40).",
)
@click.option(
    "--min-judge-j",
    metavar="X",
    default=None,
    help="The judge's Youden's J (sensitivity + specificity − 1) at least X (0.5; never below 0.2).",
)
@click.option(
    "--min-judge-kappa", metavar="X", default=None, help="The judge's Cohen's κ at least X (0.4; never below 0.2)."
)
@click.option(
    "--min-judge-items",
    metavar="N",
    default=None,
    help="The judge's figures stand on at least N human-labelled items (30; never below 20).",
)
@click.pass_context
def dataset_map(
    ctx,
    prompt,
    dataset_name,
    min_accuracy,
    max_broken,
    min_recall,
    min_precision,
    max_latency_p95_ms,
    max_cost_per_1k_items,
    max_drop,
    confidence,
    max_error_rate,
    early_stop,
    judge_corrected,
    max_loss_rate,
    max_inconsistent,
    sentinels,
    min_judge_j,
    min_judge_kappa,
    min_judge_items,
):
    """Gate PROMPT on DATASET with a bar, and optionally more bars (all must clear). A
    bar not given is dropped from the mapping: the options replace its bars as a whole."""
    bars = {
        "max_broken": max_broken,
        "min_recall": _label_bars("--min-recall", min_recall),
        "min_precision": _label_bars("--min-precision", min_precision),
        "max_latency_p95_ms": max_latency_p95_ms,
        "max_cost_per_1k_items": max_cost_per_1k_items,
        "max_drop": max_drop,
        "confidence": confidence,
        "early_stop": early_stop,
        "judge_corrected": judge_corrected,
        "max_loss_rate": max_loss_rate,
        "max_inconsistent": max_inconsistent,
        "sentinels": sentinels,
        "min_judge_j": min_judge_j,
        "min_judge_kappa": min_judge_kappa,
        "min_judge_items": min_judge_items,
        "max_error_rate": max_error_rate,
    }
    m = open_gate(ctx).map_dataset(prompt, dataset_name, min_accuracy, bars=bars)
    click.echo(
        f"{m.prompt_name} × {m.dataset_name}: min accuracy {m.min_accuracy}"
        + "".join(f", {phrase}" for phrase in _describe_bars(m))
    )


def _label_bars(option: str, values: tuple[str, ...]) -> dict[str, str] | None:
    """``LABEL=X`` options as {label: X} (the value is checked by ``Bars.parse``). The
    last "=" splits, so a label may hold one; a label given twice is refused."""
    out: dict[str, str] = {}
    for value in values:
        label, sep, bar = value.rpartition("=")
        if not sep or not label or not bar.strip():
            raise UsageError(f"{option} {value!r} is not LABEL=X, e.g. {option} urgent=0.9")
        if label in out:
            raise UsageError(f"{option} names label {label!r} twice")
        out[label] = bar
    return out or None


def _describe_bars(m) -> list[str]:
    """The mapping's bars beyond min accuracy as short phrases, fit for a terminal."""
    from gate.verdict.bars import Bars

    return [terminal_safe(phrase, 200) for phrase in Bars.parse(m.min_accuracy, m.bars).describe()]


@dataset.command("unmap")
@database_option
@click.argument("prompt")
@click.argument("dataset_name", metavar="DATASET")
@click.pass_context
def dataset_unmap(ctx, prompt, dataset_name):
    """Remove the gate of PROMPT on DATASET."""
    removed = open_gate(ctx).unmap_dataset(prompt, dataset_name)
    click.echo(f"{prompt} × {dataset_name}: {'unmapped' if removed else 'was not mapped'}")


@dataset.command("list")
@database_option
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def dataset_list(ctx, as_json):
    """Datasets and the prompts gated on them."""
    rows = open_gate(ctx).list_datasets()
    if as_json:
        echo_json(
            [
                {
                    "name": ds.name,
                    "source_uri": ds.source_uri,
                    "options": ds.options,
                    "gates": [
                        {
                            "prompt": m.prompt_name,
                            "min_accuracy": str(m.min_accuracy),
                            "bars": m.bars,
                            "declared_in": m.declared_in,
                        }
                        for m in maps
                    ],
                }
                for ds, maps in rows
            ]
        )
        return
    if not rows:
        click.echo("no datasets: add one with `promptgate dataset add NAME --source URI`")
    for ds, maps in rows:
        gates = ", ".join(_gate_text(m) for m in maps) or "not mapped"
        click.echo(f"{ds.name}\t{terminal_safe(ds.source_uri)}\t{gates}")


def _gate_text(m) -> str:
    """ "p1 ≥ 0.9", and the other bars in brackets: "p1 ≥ 0.9 (max broken 0)"; a mapping the
    CLI added (not a gate config's, which a sync leaves alone) says so: "[dataset map]"."""
    extra = _describe_bars(m)
    origin = "" if getattr(m, "declared_in", None) else " [dataset map]"
    return f"{m.prompt_name} ≥ {m.min_accuracy}" + (f" ({', '.join(extra)})" if extra else "") + origin


@dataset.command("preview")
@database_option
@click.argument("name")
@click.option("--rows", type=int, default=10, show_default=True)
@click.option(
    "--version",
    "version",
    default=None,
    help="This version instead of the current one: v3 (the dataset's third) or a version id (12).",
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def dataset_preview(ctx, name, rows, version, as_json):
    """The first rows, the row count and the label distribution of dataset NAME (a version
    stored in the gate)."""
    p = open_gate(ctx).preview_dataset(name, rows, version)
    if as_json:
        echo_json(
            {
                "row_count": p.row_count,
                "labels": p.label_counts,
                "version": p.version.id,
                "version_number": p.version.number,
                "content_hash": p.version.content_hash,
                "rows": [
                    {"item_id": r.item_id, "expected_decision": r.expected, "input": r.input} for r in p.first_rows
                ],
            }
        )
        return
    assert p.version.content_hash is not None  # a READY version (dataset_version refuses others) has its hash
    labels = ", ".join(f"{terminal_safe(label, 40)} {n}" for label, n in p.label_counts.items())
    if (p.version.fields or {}).get("unlabelled"):
        labels = "none (no label column: a dataset for judged prompts)"
    click.echo(
        f"{name}: {p.row_count} rows, labels {labels} (version {p.version.label}, {p.version.content_hash[:12]})"
    )
    for r in p.first_rows:
        fields = terminal_safe(json.dumps(r.input, ensure_ascii=False), 120)
        click.echo(f"  {terminal_safe(r.item_id)}\t{terminal_safe(r.expected)}\t{fields}")
