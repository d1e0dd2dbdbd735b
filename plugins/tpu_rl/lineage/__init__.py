"""Lineage: the datasets each step reads and writes, named as OpenLineage names them, our run
facets and their schemas, and the champion's provenance chain; no I/O (docs/lineage.md)."""
