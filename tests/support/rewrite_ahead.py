"""The test modules' assertion rewriting done once per run, not once per test process.

pytest rewrites each test module's asserts as it imports it and keeps the result in a pyc
beside it, unless ``sys.dont_write_bytecode`` (PYTHONDONTWRITEBYTECODE, set on these
machines): then every process of a ``pytest -n 3`` run rewrote all ~220 modules again
(~7 s of CPU each: collection 10.8 s of CPU, 3.7 s with the pycs). Here the xdist
controller, which collects nothing itself, writes those pycs before it starts its workers,
with pytest's own rewriting; the workers then find them (pytest checks each against its
source's hash, so an edited module is rewritten as before). Any failure leaves pytest to
rewrite as it always did."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_modules() -> list[Path]:
    """What pytest rewrites in this tree: test_*.py and the conftest.py files."""
    return sorted([*TESTS.rglob("test_*.py"), *TESTS.rglob("conftest.py")])


def rewrite_ahead(config) -> int:
    """Write the rewritten pyc of every test module that has none up to date; how many."""
    try:
        from _pytest.assertion import rewrite

        state = config.stash[rewrite.assertstate_key]
    except (ImportError, AttributeError, KeyError):  # another pytest, or --assert=plain
        return 0
    written = 0
    for source in test_modules():
        cache = rewrite.get_cache_dir(source)
        pyc = cache / (source.name[:-3] + rewrite.PYC_TAIL)
        try:
            if rewrite._read_pyc(source, pyc) is not None or not rewrite.try_makedirs(cache):
                continue
            source_hash, code = rewrite._rewrite_test(source, config)
            written += bool(rewrite._write_pyc(state, code, source_hash, pyc))
        except (AttributeError, OSError, SyntaxError):  # pytest reports it at collection, as ever
            continue
    return written
