#!/usr/bin/env python3
"""gcluster as the process harness ships it in the release bundle: the sandbox's fake gcluster,
but `deploy` first records its pid and holds for the seconds the control file asks, so a test
can act while gcluster is deploying and see whether that process outlives its task.

Kept dependency-free: it runs as the bundle's `gcluster` under the worker's Python.
"""

import json
import os
import sys
import time
from pathlib import Path

control = Path(os.environ["FAKE_GCLUSTER_CONTROL"])
if sys.argv[1:2] == ["deploy"]:
    pids = control.parent / "deploy-pids"
    pids.mkdir(exist_ok=True)
    (pids / str(os.getpid())).write_text(json.dumps(sys.argv[1:]))
    hold = json.loads(control.read_text()).get("deploy_hold_seconds", 0) if control.exists() else 0
    try:
        time.sleep(hold)
    except KeyboardInterrupt:  # SIGINT, as real gcluster gets it to stop terraform
        sys.exit("gcluster: interrupted while deploying")
real = os.environ["FAKE_GCLUSTER_REAL"]
os.execv(sys.executable, [sys.executable, real, *sys.argv[1:]])
