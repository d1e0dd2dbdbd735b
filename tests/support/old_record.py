"""A run record of the version before the current one, as the run it names left it."""

from __future__ import annotations

import hashlib
import json

from sandbox.paths import TUTORIAL_CONF
from tpu_rl.settings.run_settings import load_settings

RUN_ID = "scheduled__2026-12-01T00:00:00+00:00"

# validate's return value before identities: the settings alone
OLD_RECORD = load_settings(json.loads(TUTORIAL_CONF.read_text())).to_dict()
OLD_SLUG = "rl-" + hashlib.sha256(RUN_ID.encode()).hexdigest()[:10]
