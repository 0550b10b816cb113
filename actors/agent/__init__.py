"""The agent mode: a policy acting over many turns in a sandboxed copy of a repository.

actions (one assistant turn -> its one action), episode (the turn loop, against a Workspace).
"""
