"""An environment server Shortlist starts and stops itself: `--env-local FILE.py:APP` or `MODULE:APP`.

A file inside a package (folders holding __init__.py, as OpenEnv's envs/<name>/server/app.py) is
imported as that package's module (dipg_safety_env.server.app, from the folder above the package),
so that its relative imports (`from ..models import ...`) work; a lone file as a script's module.
The app (an ASGI app, such as openenv-core's create_app builds) is served by uvicorn in a child
process on 127.0.0.1 at a free port, waited for until it answers HTTP (at most START_S; one that
exits or never answers is one line with the tail of its stderr), and used as if --env-url named it.
It is stopped when the run ends, on an error, on Ctrl-C (the CLIs' stop_on_signals), and when the
run's process is killed outright: the child dies with its parent (process.die_with_parent).

    python -m shortlist.sources.local APP PORT PARENT_PID      # the child; served() starts it
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.metadata
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request

from shortlist.errors import OneLine, one_line

START_S = 120.0  # seconds a server may take to answer: its imports take seconds on a loaded machine
HOST = "127.0.0.1"


class LocalError(OneLine, RuntimeError):
    """A local environment that cannot be served: a bad FILE:APP, or a server that never answered; one line."""


def check(app: str) -> None:
    """FILE.py:APP (an existing file) or MODULE:APP; one line otherwise."""
    where, colon, name = str(app).rpartition(":")
    if not colon or not where or not name.isidentifier():
        raise LocalError(f"--env-local {app!r}: give FILE.py:APP or MODULE:APP (APP: the app's variable)")
    if where.endswith(".py") and not os.path.isfile(where):
        raise LocalError(f"--env-local {app!r}: no file {where}")
    if importlib.util.find_spec("uvicorn") is None:  # the server would exit on its import, in a traceback's words
        raise LocalError(f"--env-local {app!r}: serving an environment needs the OpenEnv extra (uvicorn): "
                         "pip install -e '.[openenv]' (make openenv)")


@contextlib.contextmanager
def served(app: str):
    """{"env_url", "env_local"} while app is served here; the server is stopped whatever ends the block."""
    from shortlist.executors import kill
    check(app)
    with socket.socket() as s:
        s.bind((HOST, 0))
        port = s.getsockname()[1]
    log = tempfile.TemporaryFile()  # a file: a pipe nobody reads would fill and stall the server
    server = subprocess.Popen([sys.executable, "-m", "shortlist.sources.local", app, str(port), str(os.getpid())],
                              env={**os.environ, "PYTHONHASHSEED": "0"}, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)  # Ctrl-C is ours
    try:
        url = f"http://{HOST}:{port}"
        _wait(server, url, app, log)
        yield {"env_url": url, "env_local": app}
    finally:
        kill.stop([server])
        log.close()


def _wait(server: subprocess.Popen, url: str, app: str, log) -> None:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/", timeout=2).close()  # noqa: S310  our own server
            return
        except urllib.error.HTTPError:
            return  # it answered: a route it lacks is still an answer
        except OSError:
            if server.poll() is not None:
                raise LocalError(f"--env-local {app}: the server exited ({server.returncode}): {_tail(log)}") from None
            time.sleep(0.2)
    raise LocalError(f"--env-local {app}: the server did not answer within {START_S:.0f} s: {_tail(log)}")


def _tail(log) -> str:
    """The child's last lines of stderr; its own one-line reason alone where it gave one (main())."""
    log.seek(0)
    lines = [line for line in log.read().decode(errors="replace").splitlines() if line.strip()]
    if lines and lines[-1].startswith(SAID):
        return lines[-1][len(SAID):]
    return " | ".join(lines[-3:])[-400:] or "no output"


SAID = "shortlist: "  # the child's last line of stderr when it says why it cannot serve


def package_module(path: str) -> tuple[str, str | None]:
    """(the folder to import from, the module's dotted name) of a file inside a package, the package's
    module; (its own folder, None) for a file in no package."""
    folder, name = os.path.split(os.path.abspath(path))
    parts = [name[:-3]]
    while os.path.isfile(os.path.join(folder, "__init__.py")) and os.path.basename(folder).isidentifier():
        folder, package = os.path.split(folder)
        parts.insert(0, package)
    return (folder, ".".join(parts)) if len(parts) > 1 and parts[-1].isidentifier() else (folder, None)


def load(app: str):
    """The app a FILE.py:APP or MODULE:APP names: a file inside a package imported as the package's
    module, a lone file with its folder first on the path (as for a script), a module from the working directory."""
    where, _, name = app.rpartition(":")
    if where.endswith(".py"):
        folder, dotted = package_module(where)
        sys.path.insert(0, folder)
        if dotted is None:
            spec = importlib.util.spec_from_file_location("__env_local__", where)
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(dotted)
    else:
        sys.path.insert(0, os.getcwd())
        module = importlib.import_module(where)
    return getattr(module, name)


def shipped_by(app: str) -> str | None:
    """The installed distribution (name==version) whose package holds the app's module, if one does: a
    stock environment's own version, where its /metadata reports only openenv-core's default."""
    where = app.rpartition(":")[0]
    top = (package_module(where)[1] or "") if where.endswith(".py") else where
    found = _distributions().get(top.split(".")[0], [])
    return f"{found[0]}=={importlib.metadata.version(found[0])}" if len(found) == 1 else None


@functools.lru_cache(maxsize=1)
def _distributions() -> dict:
    return importlib.metadata.packages_distributions()


def main(argv: list[str]) -> None:
    from shortlist import process
    app, port, parent = argv
    if not process.die_with_parent(int(parent)):
        sys.exit(0)  # the run is gone already
    import uvicorn
    try:
        served = load(app)
    except Exception as e:  # noqa: BLE001  the traceback for the log; the last line, ours, for the refusal
        traceback.print_exc()
        if "relative import" in str(e):  # OpenEnv's layout (from ..models import ...), outside its package
            sys.exit(f"{SAID}its relative imports need its package: give FILE.py:APP of a file in folders holding "
                     "__init__.py, or MODULE:APP from the folder above its package")
        sys.exit(f"{SAID}importing it raised {one_line(e)}: fix it, then run the same command again")
    if not callable(served):  # uvicorn would start, then fail every request with HTTP 500
        sys.exit(f"{SAID}it is a {type(served).__name__}, not an ASGI app (such as openenv-core's create_app returns)")
    uvicorn.run(served, host=HOST, port=int(port), log_level="warning")


if __name__ == "__main__":
    main(sys.argv[1:])
