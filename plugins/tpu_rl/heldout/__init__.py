"""Held-out evaluation: the candidate's and the reference models' per-item results on benchmarks
the reward never scored, and the paired verdict on them; no I/O."""
