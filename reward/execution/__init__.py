"""Running tests: the sandbox, environments, snapshots, reports, and the tests-based reward."""
