"""Bugs put into working code: the rules and model injectors, the proof of a bug and the
instance it makes (the runs on the test-runner pool: proof.py; the command: data/inject/)."""
