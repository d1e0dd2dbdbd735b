"""The training log's lines: MaxText's reward and evaluation lines, Tunix's step lines."""
