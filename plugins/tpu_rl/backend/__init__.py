"""The headless Pathways backend JobSet: its manifest, submission and wait until it runs."""
