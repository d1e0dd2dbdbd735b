"""Exit 1 listing every installed package a lock file pins at another version.

Run by the Dockerfile after pip install: the image's packages are then those the tests ran with.
Usage: python check_locked.py requirements.lock
"""

from __future__ import annotations

import re
import sys
from importlib.metadata import PackageNotFoundError, version


def mismatches(lock_text: str) -> list[str]:
    """`name: X installed, Y locked` for each locked package installed at another version."""
    found = []
    for name, locked in re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", lock_text, flags=re.M):
        try:
            installed = version(name)
        except PackageNotFoundError:
            continue
        if installed != locked:
            found.append(f"{name}: {installed} installed, {locked} locked")
    return found


def main(lock_file: str) -> int:
    with open(lock_file) as f:
        found = mismatches(f.read())
    for line in found:
        print(line, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
