"""CUDA's multi-process service (MPS) for the jobs that share a GPU: started for a run, stopped after it.

Without it, processes on one GPU take turns (time-slicing): each job's small fp32 kernels leave most
of an H200 idle while the GPU reads "100 % busy". Under MPS their kernels run side by side. Measured
(bench/results/sharing.h200.json, bench/archive/share_probe.py): 8 decode jobs 202 steps/s time-sliced,
416 under MPS; 1 job alone 172. MPS changes where kernels run, never what they compute: every job's
numbers are the same (the engine's self-check still compares each to generate()).

The daemon is the run's own: its pipe and log folders are private to this run (a fresh folder
under the temporary directory, 0700), so it neither meets another user's daemon nor leaves one
behind. A missing `nvidia-cuda-mps-control`, or a daemon that does not come up, is one line
before any job starts.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from shortlist.errors import OneLine

BINARY = "nvidia-cuda-mps-control"
UP_S = 10.0  # the most a daemon takes to make its control pipe (it is there within a second)
QUIT_S = 10.0
PROBE_S = 120.0  # a first CUDA client: a context, one kernel
PROBE_CODE = "import torch; torch.ones(1, device='cuda').sum().item()"  # what the probe's CUDA process runs


class MpsError(OneLine, RuntimeError):
    pass


class Service:
    """One MPS control daemon; env() is what a job's process needs to be its client."""

    def __init__(self, binary: str | None = None):
        found = shutil.which(binary or BINARY)
        if found is None:
            raise MpsError(f"--mps: {binary or BINARY} is not on PATH (it comes with NVIDIA's driver tools); "
                           f"run without --mps, and jobs sharing a GPU take turns on it")
        self.binary = found
        self.root = Path(tempfile.mkdtemp(prefix="shortlist-mps-"))  # 0700; short enough for a socket path
        self.pipes, self.logs = self.root / "pipe", self.root / "log"
        self.pipes.mkdir()
        self.logs.mkdir()
        self.running = False

    def env(self) -> dict[str, str]:
        return {"CUDA_MPS_PIPE_DIRECTORY": str(self.pipes), "CUDA_MPS_LOG_DIRECTORY": str(self.logs)}

    def start(self) -> "Service":
        """The daemon, up: its control pipe is there (else one line, and nothing is left). It serves the machine's
        GPUs under their own numbers: a daemon started under CUDA_VISIBLE_DEVICES=2,3 would number them 0 and 1 for
        its clients, and a job told CUDA_VISIBLE_DEVICES=2 would find no GPU or another one."""
        env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"} | self.env()
        try:
            done = subprocess.run([self.binary, "-d"], env=env, stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, timeout=UP_S)
        except subprocess.TimeoutExpired:
            self._remove()
            raise MpsError(f"--mps: the MPS daemon did not start (no answer in {UP_S:.0f} s); run without --mps") \
                from None
        deadline = time.monotonic() + UP_S
        while done.returncode == 0 and not (self.pipes / "control").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        if done.returncode != 0 or not (self.pipes / "control").exists():
            said = (done.stderr or done.stdout or self._log()).strip().splitlines()
            self._remove()
            raise MpsError(f"--mps: the MPS daemon did not start ({said[-1] if said else f'exit {done.returncode}'}); "
                           f"run without --mps")
        self.running = True
        return self

    def probe(self, gpu: str, timeout_s: float = PROBE_S) -> "Service":
        """One CUDA process run as a job would be (this GPU, this daemon's pipes), then the daemon asked whether it
        served it: a daemon can come up where its clients cannot (a container that hides the pipes, a GPU in
        exclusive mode), and a client that cannot reach it runs on without MPS, silently. Either fails in one
        line, the daemon stopped; so does anything that stops the probe (Ctrl-C)."""
        env = dict(os.environ, **self.env(), CUDA_VISIBLE_DEVICES=gpu)
        try:
            try:
                done = subprocess.run([sys.executable, "-c", PROBE_CODE], env=env, stdin=subprocess.DEVNULL,
                                      capture_output=True, text=True, timeout=timeout_s)
                said = None if done.returncode == 0 else ((done.stderr or "").strip().splitlines() or
                                                         [f"exit {done.returncode}"])[-1]
                if said is None:
                    servers = subprocess.run([self.binary], input="get_server_list\n", capture_output=True,
                                             env=dict(os.environ, **self.env()), text=True, timeout=QUIT_S)
                    said = None if any(p.isdigit() for p in servers.stdout.split()) \
                        else "it ran without the daemon's server"
            except subprocess.TimeoutExpired:
                said = f"no answer in {timeout_s:.0f} s"
            if said:
                raise MpsError(f"MPS: a CUDA process could not use the daemon ({said[:160]})")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """The daemon told to quit (it ends its servers), then its folders removed. Safe to call twice."""
        if self.running:
            self.running = False
            try:
                subprocess.run([self.binary], input="quit\n", env=dict(os.environ, **self.env()), text=True,
                               capture_output=True, timeout=QUIT_S)
            except (OSError, subprocess.TimeoutExpired):
                pass  # a daemon that will not answer dies with its pipes' folder gone
        self._remove()

    def _log(self) -> str:
        try:
            return (self.logs / "control.log").read_text(errors="replace")
        except OSError:
            return ""

    def _remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
