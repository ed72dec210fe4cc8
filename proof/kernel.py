"""The kernel every notebook runs in, whether the batch runs it or a person runs papermill by hand: papermill's own
engine, registered under NAME (pyproject.toml's papermill.engine entry point, so `papermill ... --engine shortlist`;
proof/runner.py names it for the batch), so that both paths start the same kernel the same way.

- It talks over IPC, not TCP: ipykernel warns that a TCP kernel is unencrypted (every papermill run by hand
  printed "Kernel is running over TCP without encryption"). Its sockets and its connection file live in a private
  temporary folder, which the next run sweeps after a kill -9 (shortlist.leftovers): left to jupyter_client's
  defaults, the sockets (a relative "kernel-ipc") land in the kernel's working folder and the connection file is a
  /tmp/tmp*.json, both left behind by a kill.
- It starts through shortlist.executors' launcher: it dies with the process that runs papermill (jupyter_client
  starts it in a session of its own, where killing papermill's group would miss it) and takes its share of the GPU.
- Its shutdown asks it to stop without interrupting it first: jupyter_client sends SIGINT before every shutdown,
  and an idle kernel logs that as "[IPKernelApp] ERROR | KeyboardInterrupt caught in kernel" in a run that went
  well (a kernel that does not stop is still killed, by jupyter_client or the job).
- A refusal in a cell ends papermill's command line in its one line (exit 2), not under papermill's traceback:
  papermill imports this module with its engines, and refusals() puts a sys.excepthook in front of Python's that
  reads only an uncaught PapermillExecutionError whose cell traceback is one line, which is how a refusal
  (shortlist.errors.OneLine, _render_traceback_) comes back from the kernel; everything else goes to the hook
  that was there. The batch catches papermill's errors itself (proof/runner.py) and never reaches it.
"""
from __future__ import annotations

import os
import shutil

NAME = "shortlist"


def refusals() -> None:
    """Python's last word on an uncaught refusal from a notebook's cell: its one line, and the command lines' status
    for a refusal (shortlist.errors.OneLine.exit_code)."""
    import sys
    if getattr(sys.excepthook, "shortlist_refusals", False):
        return
    before = sys.excepthook

    def hook(kind, error, tb):
        lines = getattr(error, "traceback", None)
        if kind.__name__ == "PapermillExecutionError" and isinstance(lines, list) and len(lines) == 1:
            from papermill.exceptions import strip_color

            from shortlist.errors import OneLine
            print(f"papermill: In [{error.exec_count}]: {strip_color(lines[0])}", file=sys.stderr, flush=True)
            sys.exit(OneLine.exit_code)
        before(kind, error, tb)
    hook.shortlist_refusals = True
    sys.excepthook = hook


refusals()


def __getattr__(name: str):
    """`Engine`, made when first asked for: papermill imports its entry points at the end of papermill.engines'
    own import, so a class written here under `from papermill.engines import ...` would be asked for half-made
    whenever this module is imported first (PEP 562)."""
    if name == "Engine":
        return _engine()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_ENGINE = None


def _engine():
    """The one Engine class: importing papermill's engines here may come back through the entry point (when
    this module was imported first), which then makes it; this call keeps that one (papermill registered it)."""
    global _ENGINE
    if _ENGINE is not None:
        return _ENGINE
    from papermill.engines import NBClientEngine
    if _ENGINE is not None:
        return _ENGINE

    class Engine(NBClientEngine):
        """papermill's nbclient engine, with the kernel above."""

        @classmethod
        def execute_managed_notebook(cls, nb_man, kernel_name, **kwargs):
            from traitlets.config import Config

            from shortlist import leftovers
            sockets = leftovers.make("shortlist-kernel-")  # short: a socket path holds at most 107 bytes
            config = Config({"KernelManager": {"transport": "ipc", "ip": f"{sockets}/kernel",
                                               "connection_file": f"{sockets}/kernel.json"}})
            try:
                return super().execute_managed_notebook(nb_man, kernel_name, kernel_manager_class=manager(),
                                                        config=config, **kwargs)
            finally:
                shutil.rmtree(sockets, ignore_errors=True)
    Engine.__module__, Engine.__qualname__ = __name__, "Engine"
    _ENGINE = Engine
    return Engine


def register() -> str:
    """NAME in papermill's registry, where no installed entry point put it (a tree used without pip install -e)."""
    from papermill.engines import papermill_engines
    papermill_engines.register(NAME, _engine())
    return NAME


def manager():
    """jupyter_client's kernel manager, with the kernel started as a job's process (executors.launcher)."""
    from jupyter_client import AsyncKernelManager

    from shortlist import executors

    class JobKernelManager(AsyncKernelManager):
        def format_kernel_cmd(self, extra_arguments=None):
            cmd = super().format_kernel_cmd(extra_arguments)
            if cmd[1:2] != ["-m"]:  # not `python -m ipykernel_launcher ...`: a kernel this project did not expect
                raise RuntimeError(f"unexpected kernel command {cmd[:3]}")
            return [cmd[0], *executors.launcher(cmd[2], cmd[3:], os.getpid(), gpu=True)[1:]]

        async def _async_interrupt_kernel(self) -> None:
            if self.shutting_down:
                return
            await super()._async_interrupt_kernel()
    return JobKernelManager
