"""Shared fixtures. Fakes are real servers on loopback (see tests/fakes/)."""
