"""`python -m lab doctor`: the diagnosis on the command line, as a gate (--fail-on) or a monitor (--watch).

Exit codes: 0 clean, 1 a finding at or above --fail-on, 2 the cluster could not be read, 3 partial (a check could
not run: the output names the right it needs), 4 bad arguments. Under --watch it runs until stopped, then exits 0.
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading

from ..errors import LabError
from .formats import FORMATS, render
from .report import EXIT_CLEAN, EXIT_UNREADABLE, EXIT_USAGE, SEVERITIES, UsageError

FAIL_ON = (*SEVERITIES, "never")
EXIT_CODES = ("Exit codes: 0 clean, 1 a finding at or above --fail-on, 2 the cluster could not be read, 3 partial "
              "(a check could not run), 4 bad arguments.")


class UsageParser(argparse.ArgumentParser):
    """Bad arguments exit with `usage_status`: the doctor's 4, since its 2 says the cluster could not be read."""
    usage_status = EXIT_USAGE

    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(self.usage_status, f"{self.prog}: error: {message}\n")


def main(argv: list[str] | None = None) -> None:
    """`kafka-lab-doctor` (the package's script): the doctor installed alone, with `python -m lab doctor`'s flags
    and exit codes."""
    parser = UsageParser(prog="kafka-lab-doctor", description="Read-only diagnosis of a Kafka cluster against the "
                         "failures of the Kafka Failure Lab. " + EXIT_CODES)
    add_arguments(parser)
    sys.exit(run(parser.parse_args(argv)))


def add_arguments(p) -> None:
    p.add_argument("--bootstrap", required=True, help="host:port[,...] of the cluster to read")
    p.add_argument("--command-config", help="client .properties for SASL/SSL (default: KAFKA_LAB_CLIENT_PROPERTIES)")
    p.add_argument("--jmx", help="the brokers' JMX host:port[,...]: client versions (KIP-511) and produce rates")
    p.add_argument("--fail-on", choices=FAIL_ON, default="never",
                   help="exit 1 when a finding of this severity or higher exists (default: never)")
    p.add_argument("--format", choices=FORMATS, default="text", help="text (default), json, sarif or junit")
    p.add_argument("--json", action="store_const", dest="format", const="json", help="the same as --format json")
    p.add_argument("--output", help="write the report to this file instead of standard output")
    p.add_argument("--timeout", type=float, default=20,
                   help="seconds for each request and each read of an internal topic (default 20)")
    p.add_argument("--max-read-mb", type=float, default=256,
                   help="megabytes read at most from each internal topic (default 256)")
    p.add_argument("--watch", type=float, metavar="SECONDS",
                   help="diagnose again every SECONDS (at least 5) until stopped")
    p.add_argument("--metrics", metavar="[HOST:]PORT",
                   help="with --watch: serve Prometheus metrics there (host 127.0.0.1 unless given)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on standard error")


def run(args) -> int:
    """The command; returns its exit code."""
    from . import diagnose
    if args.metrics and args.watch is None:
        return _usage("--metrics serves the risks of a monitor: give --watch SECONDS too")
    if args.watch is not None and not args.watch >= 5:
        return _usage(f"--watch {args.watch:g}: at least 5 seconds (each diagnosis starts a JVM)")
    progress = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))

    def once():
        return diagnose(args.bootstrap, jmx=args.jmx, command_config=args.command_config, timeout_s=args.timeout,
                        max_read_mb=args.max_read_mb, progress=progress)
    try:
        if args.watch is None:
            d = once()
            _write(render(d, args.format), args.output)
            return d.exit_code(args.fail_on)
        return _watch(args, once)
    except UsageError as exc:
        return _usage(str(exc))
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE


def _watch(args, once) -> int:
    from .monitor import serve, watch
    collector = None
    if args.metrics:
        try:
            collector = serve(args.metrics)
        except (OSError, ValueError) as exc:
            return _usage(f"--metrics {args.metrics}: cannot serve there ({exc})")
        print(f"lab doctor: metrics on http://{args.metrics if ':' in args.metrics else '127.0.0.1:' + args.metrics}"
              "/metrics", file=sys.stderr, flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())

    def on_result(d, error):
        if collector:
            collector.update(d)
        if error is not None:
            print(f"error: {error}", file=sys.stderr, flush=True)
        else:   # one JSON document a line: a log shipper reads each diagnosis whole
            _write(render(d, args.format, compact=True), args.output)
    watch(once, args.watch, on_result, stop)
    return EXIT_CLEAN


def _write(text: str, output: str | None) -> None:
    if output:
        with open(output, "w", encoding="utf-8") as out:
            out.write(text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def _usage(message: str) -> int:
    print(f"usage error: {message}", file=sys.stderr)
    return EXIT_USAGE
