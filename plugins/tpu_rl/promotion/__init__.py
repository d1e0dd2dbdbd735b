"""Promotion: which evaluated export of a run becomes its deployment's champion."""
