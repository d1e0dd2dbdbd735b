"""Names the run's objects and the operators that make them share, cheap to import at parse."""

from __future__ import annotations

CONTAINER = "maxtext"  # the MaxText container of every Job the run submits
