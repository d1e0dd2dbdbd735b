"""The champion's provenance chain as a person reads it: its links' labels, in order
(docs/lineage.md, The provenance chain)."""

CHAIN = [
    "base model",
    "dataset",
    "run",
    "step",
    "evaluation",
    "export",
    "approval",
    "registry version",
]
