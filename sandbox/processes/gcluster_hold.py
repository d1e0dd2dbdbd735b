#!/usr/bin/env python3
"""gcluster as the process harness ships it in the release bundle: the sandbox's fake gcluster,
but `deploy` first records its pid and holds for the seconds the control file asks (so a test can
act while gcluster is deploying and see whether that process outlives its task), and a deployed
cluster gets a creation time, as GKE reports one (the janitor's grace period reads it).

Kept dependency-free: it runs as the bundle's `gcluster` under the worker's Python.
"""

import datetime
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

control = Path(os.environ["FAKE_GCLUSTER_CONTROL"])
deploying = sys.argv[1:2] == ["deploy"]
if deploying:
    pids = control.parent / "deploy-pids"
    pids.mkdir(exist_ok=True)
    (pids / str(os.getpid())).write_text(json.dumps(sys.argv[1:]))
    hold = json.loads(control.read_text()).get("deploy_hold_seconds", 0) if control.exists() else 0
    try:
        time.sleep(hold)
    except KeyboardInterrupt:  # SIGINT, as real gcluster gets it to stop terraform
        sys.exit("gcluster: interrupted while deploying")
real = os.environ["FAKE_GCLUSTER_REAL"]
if not deploying:
    os.execv(sys.executable, [sys.executable, real, *sys.argv[1:]])
code = subprocess.call([sys.executable, real, *sys.argv[1:]])
if code == 0 and Path(os.environ["FAKE_CLOUD_STATE"]).exists():
    # the real gcluster's own reader and writer of the state (written whole, then renamed)
    loader = importlib.machinery.SourceFileLoader("fake_gcluster", real)
    gcluster = importlib.util.module_from_spec(
        importlib.util.spec_from_file_location(loader.name, real, loader=loader)
    )
    loader.exec_module(gcluster)
    state = gcluster.load_state()
    now = datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z")
    for record in state["clusters"].values():
        record.setdefault("create_time", now)
    gcluster.save_state(state)
sys.exit(code)
