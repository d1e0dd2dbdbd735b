"""Helpers the test modules share that are not fixtures (fixtures live in the conftest.py of
their tier): a test module imports these, never another test module."""
