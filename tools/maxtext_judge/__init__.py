"""MaxText's own code as the judge of the product's meshes (issue 59): judge.py runs in
`.venv-maxtext` (Python 3.12, requirements-maxtext.lock); tests/maxtext drives it."""
