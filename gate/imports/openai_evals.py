"""OpenAI eval files into the gate's files (``import_openai_evals``), two formats:

* **an exported hosted eval** (a JSON object: ``data_source_config`` with its
  ``item_schema`` — or ``schema.properties.item`` as the API returns it —, and
  ``testing_criteria``), with its data as ``{"item": {...}}`` JSONL (``--data``). Each
  ``string_check`` on the answer (``input: "{{ sample.output_text }}"``) becomes a check:
  ``eq`` equals, ``ne`` not_equals, ``like`` contains, ``ilike`` icontains, of a literal or of
  ``{{ item.COLUMN }}``; a ``label_model`` becomes a judge skeleton (it gates once it agrees with
  humans); ``text_similarity``, ``score_model``, ``python`` and the rest are listed. The
  prompt is a run's ``data_source.input_messages`` template when the file holds one (a run,
  or ``runs: [...]``), else a skeleton reading the item's fields, said so;
* **the openai/evals registry's samples** (JSONL: ``{"input": [messages] | text, "ideal":
  text | [texts]}``): a dataset (the messages that vary from sample to sample as columns) and a
  prompt whose check is the registry's Match: the answer starts with the ideal.

Untrusted like every import: read bounded, every shape checked, one line per problem."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gate.errors import UsageError

from .bundle import Imported, gate_name, read_source, unique
from .promptfoo import judge_skeleton

ANSWER_RE = re.compile(r"^\{\{\s*sample\.output_text\s*\}\}$")
ITEM_RE = re.compile(r"^\{\{\s*item\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}$")
OPERATIONS = {"eq": "equals", "ne": "not_equals", "like": "contains", "ilike": "icontains"}
MAX_ROWS = 100_000
COLUMN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
LISTED = {
    "text_similarity": "a similarity score: no gate check for it",
    "score_model": "a model's score: write a judge for it (a judge gates once it agrees with humans)",
    "python": "code: the gate runs no code from an eval file (a check is data)",
    "multi": "a formula over other graders: no gate check for it",
}


def import_openai_evals(path: Path, data: Path | None = None, model: str = "gpt-4o-mini") -> Imported:
    """The bundle an eval export (with its ``{"item": ...}`` data) or registry samples make."""
    text = read_source(path)
    first = text.lstrip()[:1]
    try:
        whole = json.loads(text) if first == "{" else None
    except RecursionError:
        raise UsageError(f"{path}: nested too deep to be an eval file") from None
    except ValueError:
        whole = None  # JSONL: one object a line
    if isinstance(whole, Mapping) and ("testing_criteria" in whole or "data_source_config" in whole):
        if data is None:
            raise UsageError(
                f'{path}: an eval export: give its data too (--data ITEMS.jsonl, one {{"item": ...}} a line)'
            )
        return hosted_eval(path, whole, _jsonl(data), model)
    return registry_samples(path, _jsonl(path), model)


def _jsonl(path: Path) -> list[tuple[int, Any]]:
    rows: list[tuple[int, Any]] = []
    for n, line in enumerate(read_source(path).splitlines(), 1):
        if not line.strip():
            continue
        if len(rows) >= MAX_ROWS:
            raise UsageError(f"{path}: over {MAX_ROWS} lines")
        try:
            rows.append((n, json.loads(line)))
        except (ValueError, RecursionError):
            raise UsageError(f"{path}: line {n}: not JSON") from None
    return rows


# --- a hosted eval -------------------------------------------------------------------------


def hosted_eval(path: Path, spec: Mapping[str, Any], lines: list[tuple[int, Any]], model: str) -> Imported:
    out = Imported(str(path))
    name = gate_name(spec.get("name") or path.stem, "openai-eval")
    columns = _item_columns(spec.get("data_source_config"))
    checks: dict[str, Any] = {}
    taken = {name, f"{name}-items"}
    for n, grader in enumerate(spec.get("testing_criteria") or (), 1):
        _grader(grader, n, checks, out, taken)
    rows = []
    for n, line in lines:
        item = line.get("item") if isinstance(line, Mapping) else None
        if not isinstance(item, Mapping):
            out.skip(f"data line {n}", "a line", 'not {"item": {...}}')
            continue
        cells = {str(k): v for k, v in item.items() if str(k) not in ("item_id", "expected_decision")}
        rows.append({"item_id": str(item.get("id", f"item-{n}"))[:128], "expected_decision": "pass", **cells})
        columns = columns or list(cells)
    if any(isinstance(line, Mapping) and line.get("sample") is not None for _, line in lines):
        out.notes.append("the data's recorded samples (answers) are not read: the gate calls the model itself")
    messages, run_model = _run_template(spec, columns, out)
    if not checks:
        raise UsageError(f"{path}: no grader maps to a check: nothing the gate can decide (see the graders above)")
    dataset = f"{name}-items"
    out.datasets[dataset] = rows
    out.prompts[name] = {
        "name": name,
        "description": f"imported from an OpenAI eval ({path.name})",
        "model": run_model or model,
        "messages": messages,
        "decision": {"type": "checks", "checks": checks},
    }
    out.mappings[name] = [{"dataset": dataset, "min_accuracy": 1.0}]
    return out


def _item_columns(config: Any) -> list[str]:
    if not isinstance(config, Mapping):
        return []
    schema = config.get("item_schema")
    if schema is None and isinstance(config.get("schema"), Mapping):
        schema = (config["schema"].get("properties") or {}).get("item")
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    return [str(k) for k in properties] if isinstance(properties, Mapping) else []


def _grader(grader: Any, n: int, checks: dict[str, Any], out: Imported, taken: set[str]) -> None:
    kind = grader.get("type") if isinstance(grader, Mapping) else None
    where = f"testing_criteria[{n}]" + (
        f" ({str(grader.get('name'))[:60]})" if isinstance(grader, Mapping) and grader.get("name") else ""
    )
    if kind == "string_check":
        found = _string_check(grader)
        if isinstance(found, str):
            out.skip(where, "string_check", found)
        else:
            checks[unique(_check_name(grader.get("name"), n), set(checks))] = found
        return
    if kind == "label_model":
        judge = unique(gate_name(f"{grader.get('name') or 'label'}-judge", f"label-judge-{n}"), taken)
        out.judges[judge] = _label_judge(judge, grader)
        out.skip(
            where,
            f"label_model → judges/{judge}.yaml",
            "a judge skeleton: it needs a human-labelled dataset and its own mapping before a prompt may name it; "
            "not part of the decision",
        )
        return
    out.skip(where, str(kind)[:40], LISTED.get(str(kind), "no gate check for this grader type"))


def _check_name(value: Any, n: int) -> str:
    name = re.sub(r"[^A-Za-z0-9_]+", "_", str(value or "")).strip("_")[:64]
    return name if name and not name[0].isdigit() else f"check_{n}"


def _string_check(grader: Mapping[str, Any]) -> dict[str, Any] | str:
    op = OPERATIONS.get(str(grader.get("operation")))
    if op is None:
        return f"operation {str(grader.get('operation'))[:20]!r}: not one of eq, ne, like, ilike"
    if not isinstance(grader.get("input"), str) or not ANSWER_RE.match(grader["input"].strip()):
        return "its input is not the answer ({{ sample.output_text }})"
    reference = grader.get("reference")
    if not isinstance(reference, str) or not reference:
        return "no reference text"
    column = ITEM_RE.match(reference.strip())
    if column:
        return {op: {"column": column.group(1)}}
    if "{{" in reference:
        return "its reference is a template other than {{ item.COLUMN }}"
    return {op: reference}


def _label_judge(name: str, grader: Mapping[str, Any]) -> dict[str, Any]:
    labels = [str(x) for x in grader.get("labels") or () if isinstance(x, str)][:64]
    skeleton = judge_skeleton(name, "see the messages below")
    messages = []
    for m in grader.get("input") or ():
        if isinstance(m, Mapping) and isinstance(m.get("content"), str):
            content = re.sub(r"\{\{\s*sample\.output_text\s*\}\}", "{{ answer }}", m["content"])
            messages.append({"role": str(m.get("role", "user")), "content": content})
    if len(set(labels)) >= 2:
        skeleton["labels"] = labels
    if messages and any("{{ answer }}" in m["content"] for m in messages):
        skeleton["messages"] = messages
    if isinstance(grader.get("model"), str):
        skeleton["model"] = grader["model"][:128]
    passing = [str(x) for x in grader.get("passing_labels") or ()]
    skeleton["description"] = f"imported label_model; passing labels {passing}; needs human labels before it can gate"
    return skeleton


def _run_template(
    spec: Mapping[str, Any], columns: list[str], out: Imported
) -> tuple[list[dict[str, str]], str | None]:
    listed = spec.get("runs")
    runs: list[Any] = listed if isinstance(listed, list) else [spec]
    for run in runs:
        source = run.get("data_source") if isinstance(run, Mapping) else None
        messages = source.get("input_messages") if isinstance(source, Mapping) else None
        template = messages.get("template") if isinstance(messages, Mapping) else None
        if isinstance(template, list):
            found = [
                {"role": str(m.get("role", "user")), "content": m["content"]}
                for m in template
                if isinstance(m, Mapping) and isinstance(m.get("content"), str)
            ]
            if found and isinstance(source, Mapping):
                model = source.get("model")
                return found, model if isinstance(model, str) else None
    out.notes.append("the eval holds no prompt (a run's input_messages): the prompt file is a skeleton: write it")
    named = [c for c in columns if COLUMN_NAME.fullmatch(c)]  # a schema's key is the file's: never template code
    for c in (c for c in columns if not COLUMN_NAME.fullmatch(c)):
        out.skip("item_schema", repr(c[:60]), "not a column name the skeleton reads (letters, digits, _)")
    fields = "\n".join(f"{c}: {{{{ item.{c} }}}}" for c in named[:32]) or "{{ item }}"
    return [{"role": "system", "content": "(the prompt: write it)"}, {"role": "user", "content": fields}], None


# --- the registry's samples ----------------------------------------------------------------


def registry_samples(path: Path, lines: list[tuple[int, Any]], model: str) -> Imported:
    out = Imported(str(path))
    name = gate_name(path.stem.split(".")[0], "samples")
    samples = []
    for n, line in lines:
        messages = _sample_messages(line.get("input") if isinstance(line, Mapping) else None)
        ideal = line.get("ideal") if isinstance(line, Mapping) else None
        ideals = (
            [ideal]
            if isinstance(ideal, str)
            else [i for i in ideal or () if isinstance(i, str)]
            if isinstance(ideal, list)
            else []
        )
        if messages is None or not ideals:
            out.skip(f"line {n}", "a sample", "not {input: messages or text, ideal: text or texts}")
            continue
        if len(ideals) > 1:
            out.skip(f"line {n}", f"{len(ideals) - 1} more ideal(s)", "the check reads the first ideal")
        samples.append((n, messages, ideals[0]))
    if not samples:
        raise UsageError(f"{path}: no sample with input and ideal")
    shape = [m["role"] for m in samples[0][1]]
    kept = [s for s in samples if [m["role"] for m in s[1]] == shape]
    for n, _, _ in (s for s in samples if s not in kept):
        out.skip(
            f"line {n}", "a sample", "its messages' roles differ from the first sample's: one prompt holds one shape"
        )
    template, rows = (
        [],
        [{"item_id": f"sample-{n}", "expected_decision": "pass", "ideal": ideal} for n, _, ideal in kept],
    )
    for k, role in enumerate(shape):
        contents = {s[1][k]["content"] for s in kept}
        if len(contents) == 1:
            template.append({"role": role, "content": _literal(next(iter(contents)))})
            continue
        column = f"{role}_{k + 1}"
        template.append({"role": role, "content": "{{ item." + column + " }}"})
        for row, sample in zip(rows, kept):
            row[column] = sample[1][k]["content"]
    dataset = unique(f"{name}-samples", {name})
    out.datasets[dataset] = rows
    out.prompts[name] = {
        "name": name,
        "description": f"imported from openai/evals samples ({path.name})",
        "model": model,
        "messages": template,
        "decision": {"type": "checks", "checks": {"matches_ideal": {"starts_with": {"column": "ideal"}}}},
    }
    out.mappings[name] = [{"dataset": dataset, "min_accuracy": 1.0}]
    out.notes.append("the check is the registry's Match (the answer starts with the ideal); Includes would be contains")
    return out


def _sample_messages(value: Any) -> list[dict[str, str]] | None:
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        return None
    found = [
        {"role": str(m.get("role")), "content": m["content"]}
        for m in value
        if isinstance(m, Mapping) and isinstance(m.get("content"), str)
    ]
    return found if len(found) == len(value) else None


def _literal(text: str) -> str:
    """A message the same in every sample, kept as template text that renders to exactly it:
    in a raw block when Jinja reads that block back as the text alone, else as one string
    constant (``{{ "..." }}``). A sample's text is the file's, not the gate's: an
    ``{%endraw%}`` in it (spelt with any spacing, or rebuilt from pieces around one a filter
    removed) must not close the block and make the rest template code (``{{ item.ideal }}``
    would hand the model the very answer its check compares with)."""
    if "{{" not in text and "{%" not in text and "{#" not in text:
        return text
    wrapped = "{% raw %}" + text + "{% endraw %}"
    return wrapped if _renders_as(wrapped, text) else "{{ " + json.dumps(text, ensure_ascii=False) + " }}"


def _renders_as(source: str, text: str) -> bool:
    """Whether ``source`` is, to Jinja, the text ``text`` and nothing else."""
    from jinja2 import Environment, TemplateSyntaxError, nodes

    try:
        body = Environment(keep_trailing_newline=True).parse(source).body
    except TemplateSyntaxError:
        return False
    if len(body) != 1 or not isinstance(body[0], nodes.Output):
        return False
    data = [n.data for n in body[0].nodes if isinstance(n, nodes.TemplateData)]
    return len(data) == len(body[0].nodes) and "".join(data) == text
