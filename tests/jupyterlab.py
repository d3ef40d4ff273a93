"""JupyterLab as `make lab` starts it (lab.commands.main.jupyter_command), for the tests and benchmarks that drive it:
a free port, a token, its REST API, and every process it starts marked in its environment (KAFKA_LAB_BROWSER_TEST)
so that what it leaves running can be found."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path

from lab.commands.main import jupyter_command
from lab.runtime.ports import free_port
from lab.toolbox.panel import HEADLESS

MARK = "KAFKA_LAB_BROWSER_TEST"   # in JupyterLab's environment: every kernel and process it starts inherits it


class LabDidNotStart(RuntimeError):
    pass


class Lab:
    """A JupyterLab server started with lab.commands.main.jupyter_command, as `make lab` starts it."""

    def __init__(self, root: Path, work: Path, idle_minutes: float = 0):
        """Notebooks under `root`, its log and settings under `work`; `idle_minutes` as `make lab`'s culling (0: none)."""
        self.root, self.port, self.token = root, free_port(), uuid.uuid4().hex
        self.marker = uuid.uuid4().hex
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = work / "jupyterlab.log"
        env = {**{k: v for k, v in os.environ.items() if k != HEADLESS}, MARK: self.marker,
               # a fresh workspace and the lab's defaults, not the tester's own JupyterLab settings
               "JUPYTERLAB_WORKSPACES_DIR": str(work / "workspaces"),
               "JUPYTERLAB_SETTINGS_DIR": str(work / "user-settings")}
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(jupyter_command(self.port, self.token, root, idle_minutes=idle_minutes),
                                     cwd=root, env=env,
                                     stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        deadline = time.monotonic() + 90
        while True:
            try:
                self.api("status")
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise LabDidNotStart(f"JupyterLab did not start on port {self.port}:\n{self.log_tail()}")
                time.sleep(0.5)

    def api(self, path: str, method: str = "GET", body=None):
        request = urllib.request.Request(f"{self.url}/api/{path}", method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            body = response.read()
        return json.loads(body) if body else None

    def session(self, notebook: str) -> dict | None:
        return next((s for s in self.api("sessions") if s["path"] == notebook), None)

    def shutdown_kernels(self) -> None:
        for session in self.api("sessions"):
            self.api(f"sessions/{session['id']}", method="DELETE")

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()        # JupyterLab shuts its kernels down
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self._log.close()


def marked(marker: str) -> dict:
    """pid -> psutil.Process of every process whose environment carries this JupyterLab's marker."""
    import psutil
    found = {}
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(MARK) == marker:
                found[proc.pid] = proc
        except (psutil.Error, OSError):
            continue
    return found
