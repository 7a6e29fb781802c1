"""Datasets: the sources they are read from (``sources/``), the importer that makes a source's
rows an immutable version, and the item fields a version's rows have."""
