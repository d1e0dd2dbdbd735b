"""The headless Pathways backend JobSet: its manifest, its Kueue queue's coverage, submission and
wait until it runs."""
