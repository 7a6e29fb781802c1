"""`promptgate action`: the GitHub Action's logic, thin over the domain API.

On a **pull request** (mode check): list the files the PR changes (PyGithub), keep the
ones the ``prompts`` globs match, validate each (problems become ``::error`` annotations
and a section of the report), submit the valid ones in check mode with source = repo, PR,
head SHA, path, author, wait (running the workers in-process with ``run-workers``), render
the report, upsert the PR's one report comment, set the ``prompt-gate`` commit status on
the head SHA, write the outputs and the step summary. A changed gate config is **not**
synced: its diff is shown as "takes effect after merge" and the bars in the database are
the ones that count (a pull request cannot lower its own bar).

On a **push to the default branch** (mode apply): sync the gate config first, then submit
the prompts the push changed in apply mode and report the same way (a commit comment and
the step summary). A push to another branch is evaluated in check mode.

Nothing is a success that was not judged: a changed prompt the gate has no bars for fails
with one line saying what to add, unless its pull request's gate config proposes bars for it
(then it is checked on those, labelled so); on the default branch the push job records per
commit what it did, so `wait --sha` answers for every commit (``gating``). `mode: wait` is a
release job's `promptgate wait --sha` of the commit.

Exit codes: 0 every changed prompt cleared its bars (or no prompt changed), 1 a candidate was
rejected (only with fail-on-reject), 2 an invalid or ungated file, a failed or cancelled
update, the gate or GitHub unreachable, the token's scope, or an error, 3 still running when
the timeout passed. The commit status reports the verdict whatever fail-on-reject says (an
``error`` status when the gate could not be reached).

Modules: ``inputs`` (the inputs, declared once), ``workflow`` (the event, the mode, the
log, outputs and summary), ``problems`` (annotations), ``run`` (the phases and
``run_action``), ``gating`` (ungated prompts, proposed bars, the commit record, outages),
``outcome`` (status output, exit code, commit status).
"""

from .inputs import DEFAULT_PROMPTS, INPUTS, ActionInput, ActionOptions, parse_bool

RUN_NAMES = ("REPORT_FILE", "ActionRun", "run_action", "wait_for")
PART_NAMES = (
    "PathFilter",
    "compile_glob",
    "glob_filter",
    "split_patterns",
    "combine_exit_codes",
    "Problem",
    "command_data",
    "command_property",
    "field_line",
    "problem_from",
    "commit_state",
    "exit_code_for",
    "overall_status",
    "Event",
    "effective_mode",
)


def __getattr__(name: str):
    """Only ``inputs`` is imported with the package: the CLI builds `promptgate action`'s
    options from it with every `promptgate` command, which must start at once. The other
    parts (yaml, the reports) come when first asked for, the phases (``run``: PyGithub,
    ~0.15 s) only when the Action runs."""
    if name in RUN_NAMES:
        from . import run

        return getattr(run, name)
    if name in PART_NAMES:
        from gate.contract import release

        from . import globs, outcome, problems, workflow

        return next(getattr(m, name) for m in (globs, release, problems, outcome, workflow) if hasattr(m, name))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_PROMPTS",
    "INPUTS",
    "REPORT_FILE",
    "ActionInput",
    "ActionOptions",
    "ActionRun",
    "Event",
    "PathFilter",
    "Problem",
    "combine_exit_codes",
    "command_data",
    "command_property",
    "commit_state",
    "compile_glob",
    "effective_mode",
    "exit_code_for",
    "field_line",
    "glob_filter",
    "overall_status",
    "parse_bool",
    "problem_from",
    "run_action",
    "split_patterns",
    "wait_for",
]
