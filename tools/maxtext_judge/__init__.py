"""MaxText's own code as the judge of the product's meshes: judge.py runs in
`.venv-maxtext` (Python 3.12, requirements-maxtext.lock); tests/maxtext drives it."""
