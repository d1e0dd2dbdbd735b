"""`make demo-ui`: the process harness's deployment on SQLite, for a person at a browser."""

PASSWORD = "admin"  # the simple auth manager's demo login (loopback only)
