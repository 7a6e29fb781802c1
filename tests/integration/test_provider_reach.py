"""A provider that cannot be reached is named with its URL and where that URL came from
(issue 24, friction 3): `OPENAI_BASE_URL` unset says so, a declared provider says where it
was declared; the URL shows no credentials, query or fragment, and no other host (the
provider's free text never reaches the message). A worker with no endpoint configured says
so at start."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys

import pytest
from support.cli import ROOT

from gate.calls.llm import call_prompt
from gate.calls.providers import ProviderDecl, default_endpoint, endpoint_for, endpoint_warning
from gate.errors import ModelCallError
from gate.prompt.spec import parse_spec
from gate.settings import Settings

SPEC = parse_spec(
    {
        "name": "urgency",
        "model": "gpt-test",
        "labels": ["urgent", "routine"],
        "messages": [{"role": "user", "content": "{{ item.text }}"}],
    }
)


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_refused_connection_names_the_provider_its_url_and_where_it_came_from():
    port = closed_port()
    endpoint = default_endpoint(
        {"OPENAI_BASE_URL": f"http://user:secret@127.0.0.1:{port}/v1?key=k#frag", "OPENAI_API_KEY": "test-key"}
    )
    with pytest.raises(ModelCallError) as info:
        call_prompt(SPEC, {"text": "hello"}, settings=Settings(request_timeout=5.0), endpoint=endpoint)
    assert str(info.value) == (
        f"cannot reach provider default (connection refused) at http://127.0.0.1:{port}/v1, from OPENAI_BASE_URL"
    )
    assert "secret" not in str(info.value) and "key=k" not in str(info.value)


def test_an_unset_openai_base_url_is_named_as_unset():
    assert default_endpoint({}).where() == (
        "https://api.openai.com/v1, OPENAI_BASE_URL is unset: the OpenAI SDK's default"
    )


def test_a_declared_provider_says_where_it_was_declared():
    decl = ProviderDecl("east", "https://east.example/openai/v1")
    assert endpoint_for(decl, {}).where() == (
        "https://east.example/openai/v1, declared under providers: in the gate config"
    )
    env = {"PROMPTGATE_PROVIDERS": json.dumps({"east": {"base_url": "https://east.example/openai/v1"}})}
    assert endpoint_for(decl, env).where().endswith(", declared in PROMPTGATE_PROVIDERS")


def test_the_warning_is_given_only_without_any_endpoint():
    assert "export OPENAI_BASE_URL=http://127.0.0.1:8000/v1" in endpoint_warning({})
    assert endpoint_warning({"OPENAI_BASE_URL": "http://127.0.0.1:8000/v1"}) is None
    assert endpoint_warning({"OPENAI_API_KEY": "sk-x"}) is None


@pytest.mark.parametrize("configured", [False, True])
def test_a_worker_without_an_endpoint_warns_at_start(tmp_path, configured):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["PYTHONPATH"] = str(ROOT)
    if configured:
        env["OPENAI_BASE_URL"] = "http://127.0.0.1:8000/v1"
    db = f"sqlite:///{tmp_path / 'gate.db'}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gate.cli", "worker", "--database-url", db],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    try:
        try:
            proc.wait(4)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    warned = "warning: no model endpoint configured: OPENAI_BASE_URL and OPENAI_API_KEY are unset" in err
    assert warned != configured, err[-2000:]
