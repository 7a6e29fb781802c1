"""The wheel's package list (pyproject's ``[tool.setuptools] packages``, written by hand for
the two folders it maps: ``sql`` as ``gate.sql``, ``prompts-example`` as ``gate.example``)
names every package of the tree: ``gate.kinds`` was left out, so an installed wheel failed
at its first import (issue 50.3; tests/acceptance/test_wheel_demo.py runs the wheel)."""

from __future__ import annotations

import tomllib

from support.cli import ROOT


def test_every_package_of_the_tree_is_in_the_wheel():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    mapped = {ROOT / folder: name for name, folder in setuptools["package-dir"].items()}
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for top in ("gate", "workers")
        for p in (ROOT / top).rglob("__init__.py")
    }
    found |= {
        f"{name}{'.'.join(('', *p.parent.relative_to(folder).parts))}"
        for folder, name in mapped.items()
        for p in folder.rglob("__init__.py")
    }
    missing = sorted(found - listed)
    assert not missing, f"packages not in pyproject's [tool.setuptools] packages: {missing}"
    assert listed >= set(mapped.values())
