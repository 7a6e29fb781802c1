"""The release path a team pins (issue 35.7): a version, a changelog entry for it, a wheel and
an sdist built from this tree and checked with twine, the docs' `uses:` line naming the tag of
this version, and every extra the docs tell people to install declared in pyproject.toml."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import zipfile

from packaging.requirements import Requirement
from support.cli import ROOT

import gate

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "CHANGELOG.md"]


def test_the_version_is_one_and_the_changelog_has_it():
    assert gate.__version__ == VERSION
    assert re.search(rf"^## {re.escape(VERSION)}$", (ROOT / "CHANGELOG.md").read_text(), re.M)


def test_the_docs_pin_this_versions_tag():
    uses = {m for doc in DOCS for m in re.findall(r"uses: your-org/prompt-gate@([\w.]+)", doc.read_text())}
    assert uses == {f"v{VERSION}"}


def test_every_extra_the_docs_install_is_declared():
    extras = set(PYPROJECT["project"]["optional-dependencies"])
    named = []
    for doc in DOCS:
        for spec in re.findall(r"pip install '([^']+)'", doc.read_text()):
            req = Requirement(spec.replace(".[", "prompt-gate[", 1) if spec.startswith(".[") else spec)
            assert req.name == "prompt-gate" and spec.startswith("."), f"{doc.name}: {spec} is not this project"
            named += sorted(req.extras)
    assert named and set(named) <= extras, (named, extras)


def test_the_client_extra_is_a_subset_of_the_dependencies():
    """The Action installs the client extra alone: each is one of the package's own
    requirements, at the same version bounds."""
    deps = {Requirement(d).name: str(Requirement(d).specifier) for d in PYPROJECT["project"]["dependencies"]}
    for spec in PYPROJECT["project"]["optional-dependencies"]["client"]:
        req = Requirement(spec)
        assert deps.get(req.name) == str(req.specifier), spec


def test_a_wheel_and_an_sdist_build_and_pass_twine_check(tmp_path):
    out = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    wheel = out / f"prompt_gate-{VERSION}-py3-none-any.whl"
    sdist = out / f"prompt_gate-{VERSION}.tar.gz"
    assert wheel.is_file() and sdist.is_file(), sorted(p.name for p in out.iterdir())
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(wheel), str(sdist)], capture_output=True, text=True
    )
    assert checked.returncode == 0 and checked.stdout.count("PASSED") == 2, checked.stdout + checked.stderr
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"gate/sql/mysql/0022_commit_records_and_holds.sql", "gate/report/templates/report.md.j2"} <= names
    assert "gate/example/gate.yaml" in names and not any(n.startswith("tests/") for n in names)
