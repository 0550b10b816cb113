"""Stand-ins for the public services a repository's tests call, served inside the sandbox.

Old psf/requests suites (before pytest-httpbin, 2015) send their requests to http://httpbin.org
(`HTTPBIN = os.environ.get('HTTPBIN_URL', 'http://httpbin.org/')`). SWE-bench's containers had
a network; the sandbox has none, so those tests fail on name resolution whether the code is
fixed or not, and an instance whose fixed tests are among them has no FAIL_TO_PASS. An
environment (EnvSpec.services) may name stand-ins from REGISTRY instead: each is a WSGI
application from PyPI, in a venv of its own built and cached by Environments like any other,
served by `_SERVE` on the sandbox's own loopback, with its host names mapped to 127.0.0.1 in
the sandbox's own /etc/hosts (sandbox.Server, inside.py). The host's network, /etc/hosts and
ports are never involved.

What a stand-in is, and is not:

    trusted as      environment code: PyPI packages by name, pinned here, started by the
                    harness's PID 1 before the candidate's code exists, with `python -I` from
                    `/` (never the repository on its path); its output is kept apart
    contained as    everything else in the sandbox: uid 65534, the run's cgroups and rlimits,
                    a read-only venv, no route out; it dies with the sandbox's PID 1
    not             the real service: http only (an https:// URL of the host still fails, no
                    TLS is served), today's release of the application (an old suite may
                    expect an old answer), and the command runs as the same user: its code can
                    stop the stand-in and serve on its port itself, which gives it nothing its
                    own process could not fake in memory (the verdict is the recorder's)

A new stand-in is one entry in REGISTRY.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reward.execution.environments import Environments, EnvSpec
from reward.execution.sandbox import Server

# Run by the stand-in's venv python: serve argv[1] ("module:attribute", a WSGI application) on
# 127.0.0.1:argv[2] with werkzeug's threaded server (HTTP/1.1, keep-alive, chunked request
# bodies; the standard library's wsgiref has none of them), one log line per request muted.
_SERVE = """
import importlib, logging, sys
from werkzeug.serving import make_server
module, _, name = sys.argv[1].partition(":")
app = getattr(importlib.import_module(module), name)
logging.getLogger("werkzeug").setLevel(logging.ERROR)
make_server("127.0.0.1", int(sys.argv[2]), app, threaded=True).serve_forever()
"""


@dataclass(frozen=True)
class StandIn:
    hosts: tuple[str, ...]  # names the sandbox resolves to 127.0.0.1 (no wildcard: a.httpbin.org stays unknown)
    port: int  # served on 127.0.0.1
    app: str  # the WSGI application, "module:attribute"
    environment: EnvSpec  # its own venv: werkzeug among the requirements (_SERVE imports it)
    start_s: float = 20.0  # to accept its first connection (an import of flask on a loaded node)


REGISTRY: dict[str, StandIn] = {
    # httpbin 0.10.0 imports parse_authorization_header, gone in werkzeug 3.0; 0.10.2 runs on
    # it. flask and werkzeug pinned to the pair it was tested with here (tests/reward/
    # test_services.py, requests' Lite rows), the rest resolved as of the date.
    "httpbin": StandIn(
        hosts=("httpbin.org", "www.httpbin.org"),
        port=80,
        app="httpbin.core:app",
        environment=EnvSpec(
            python="3.11",
            requirements=("httpbin==0.10.2", "flask==3.1.3", "werkzeug==3.1.9"),
            exclude_newer="2026-12-01T00:00:00Z",
        ),
    ),
}


def servers(names: Sequence[str], envs: Environments) -> tuple[Server, ...]:
    """The sandbox servers of an environment's `services`, each stand-in's venv built (or taken
    from the cache) by `envs`. ValueError names an unknown one; a build that fails raises
    EnvironmentFailed (or InterpreterUnavailable), as the instance's own environment would."""
    unknown = sorted(set(names) - set(REGISTRY))
    if unknown:
        raise ValueError(f"environment: unknown services {unknown} (known: {sorted(REGISTRY)})")
    out = []
    for name in names:
        stand_in = REGISTRY[name]
        env = envs.ensure(stand_in.environment)
        argv = (env.python, "-I", "-c", _SERVE, stand_in.app, str(stand_in.port))
        variables = (("PATH", "/usr/local/bin:/usr/bin:/bin"), ("HOME", "/tmp"), ("LANG", "C.UTF-8"))
        out.append(Server(name, argv, stand_in.port, stand_in.hosts, variables, env.ro_paths, stand_in.start_s))
    return tuple(out)
