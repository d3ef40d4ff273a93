"""The lab's watchdog ("reaper"): when the lab process dies, however it dies, its children die too.

    python -m lab.runtime.reaper        (started by lab.runtime.processes.ensure_reaper, once per lab process)

The lab starts every child in a process group of its own and writes one line per child on this
process's stdin: `add <pgid>` when it starts it, `del <pgid>` once it has stopped it (or seen it
exit). When stdin reaches end-of-file the lab is gone: it exited, or was killed with SIGKILL and
the OS closed its end of the pipe for it. Every group still registered then gets SIGKILL.

A pipe's end-of-file is the one death notice that every Unix gives (Linux, macOS, WSL2), unlike
Linux's PR_SET_PDEATHSIG, which also fires when the THREAD that forked the child ends.
Standard library only, and nothing imported from the lab: it starts with the lab's first child.
"""
import os
import signal
import sys


def main() -> None:
    # It runs in a session of its own, so a terminal's Ctrl-C never reaches it; ignoring SIGINT and
    # SIGTERM as well means that a signal sent to the lab's group (a kernel interrupt, a kernel manager
    # ending the kernel) cannot end it before it has done its job.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    groups: set[int] = set()
    for line in sys.stdin.buffer:           # blocks until the lab writes a line or its end closes
        verb, _, pgid = line.decode(errors="replace").partition(" ")
        try:
            pgid = int(pgid)
        except ValueError:
            continue
        if pgid <= 1:                       # killpg(0) would be our own group, 1 is init's
            continue
        if verb == "add":
            groups.add(pgid)
        elif verb == "del":                 # stopped by the lab: its number may be reused later
            groups.discard(pgid)
    for pgid in groups:                     # end-of-file: the lab is gone
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):   # already gone (or no longer ours)
            pass


if __name__ == "__main__":
    main()
