"""The training log's rewards: parsing, following the log, the reward wait and its resumes."""
