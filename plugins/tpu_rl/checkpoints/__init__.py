"""A run's checkpoints: which step to export, quarantine of poisoned saves, the resume history."""
