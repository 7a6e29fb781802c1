"""A release wait (`wait --sha`) never answers "nothing to gate" for a commit whose push job
submitted an apply while the wait was looking it up (review of issue 39's round).

The wait read the commit's updates first and the push job's record second. The push job
submits its applies and then records "submitted"; when both landed between the wait's two
reads, the wait saw no update and a record of submitted, and answered exit 4 (nothing to
gate: the release may go ahead) for a commit whose apply had not been judged. The race is
made certain here by running the push job, on the real gate, right after the wait's first
read."""

from __future__ import annotations

from support.helpers import rules_spec, setup_gate

from gate.contract.release import EXIT_NOTHING_TO_GATE, wait_for_release

SHA = "ab" * 20


class PushJobDuringTheWait:
    """The gate as the wait sees it, with the push job (submit the apply, record the commit)
    run once, just after the wait's first look at the commit's updates."""

    def __init__(self, gate):
        self.gate, self.pushed = gate, None

    def updates_for_sha(self, sha, prompt_name=None, mode=None):
        found = self.gate.updates_for_sha(sha, prompt_name, mode)
        if self.pushed is None:
            self.pushed = self.gate.submit(rules_spec("p1", "v1"), "apply", source={"sha": sha})
            self.gate.record_commit(sha, "submitted", [self.pushed])
        return found

    def status(self, update_id, failures=10):
        return self.gate.status(update_id, failures)

    def commit_record(self, sha):
        return self.gate.commit_record(sha)


def test_an_apply_submitted_between_the_waits_reads_is_waited_for_not_nothing_to_gate(gate, tmp_path):
    setup_gate(gate, tmp_path)
    racing = PushJobDuringTheWait(gate)
    code, reports = wait_for_release(racing, SHA, None, 1.0, 0.05, "apply", None)
    assert racing.pushed is not None
    assert code != EXIT_NOTHING_TO_GATE, "the release went ahead on an apply nobody judged"
    assert (code, [r.update.id for r in reports]) == (3, [racing.pushed])  # still open: no worker here
