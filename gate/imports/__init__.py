"""Imports from other tools' eval files into the gate's own files: prompt files, datasets
(JSONL in the gate's format) and a gate config's entries, plus a list of everything not
imported, each with where it was and why (nothing is dropped silently).

One module per source: ``promptfoo`` (a ``promptfooconfig.yaml``), ``openai_evals`` (an
exported hosted eval with its ``{"item": ...}`` data, or the openai/evals registry's samples).
Both build an ``Imported`` bundle; ``bundle.write`` checks every prompt file with the gate's
own parser and the gate config with its own, then writes them."""

from .bundle import Imported, Skipped

__all__ = ["Imported", "Skipped"]
