"""What a run tells people: the run report and failure notifications."""
