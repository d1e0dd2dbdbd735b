"""The training watch: the pure core that judges what the training shows (its log lines,
TensorBoard scalars, silences) and says what to do; no I/O."""
