"""``omnitts-probe --url http://HOST:PORT --model NAME [--out DIR]``: the server checks against a running server."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

PROG = "omnitts-probe"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse exits 2 already; the message on one line, as every probe error
        say(f"{message} (see --help)")
        raise SystemExit(2)


def say(message: str) -> None:
    """One line on stderr, whatever the message holds (a server's text may hold newlines)."""
    print(f"{PROG}: {' '.join(str(message).split())}", file=sys.stderr)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _hz(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive whole number of Hz, got {text!r}")
    return value


def _levels(text: str) -> tuple[int, ...]:
    try:
        levels = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from exc
    if not levels or min(levels) < 1:
        raise argparse.ArgumentTypeError(f"concurrency levels must be >= 1, got {text!r}")
    return levels


def _extra(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--extra must be a JSON object: {exc}") from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("--extra must be a JSON object")
    return value


def parser() -> argparse.ArgumentParser:
    from omnitts.validators.engine.probe import STEPS

    p = _Parser(
        prog=PROG,
        description="Check a running /v1/audio/speech server (any model): response formats, streaming (I1), "
        "concurrency (I4), bad requests, TTFP/RTF/underrun. Writes report.json, report.md and each request's WAV.",
    )
    p.add_argument("--url", required=True, help="the server, http://HOST:PORT")
    p.add_argument("--model", required=True, help="the served model name (as /v1/models lists it)")
    p.add_argument("--out", type=Path, default=Path("omnitts-probe"), help="report folder (default ./omnitts-probe)")
    p.add_argument("--timeout", type=_seconds, default=120.0, help="seconds one request may take (default 120)")
    p.add_argument("--bad-timeout", type=_seconds, default=30.0, help="seconds a bad request may take (default 30)")
    p.add_argument("--concurrency", type=_levels, default=(1, 4, 8), help="perf levels (default 1,4,8)")
    p.add_argument("--seed", type=int, default=None, help="send this `seed` with every request (determinism)")
    p.add_argument("--extra", type=_extra, default={}, help="JSON fields added to every request, e.g. a voice")
    p.add_argument("--sample-rate", type=_hz, default=None, help="pcm sample rate when the server offers no wav")
    p.add_argument("--av-python", default=None, help="a Python with PyAV to decode mp3/opus when this one lacks it")
    p.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY"), help="bearer token (default $OPENAI_API_KEY)")
    p.add_argument(
        "--worker-rpc",
        action="store_true",
        help="look inside the workers for i5.abort_recovery through POST /collective_rpc (a server started with "
        "omnitts's worker extension and VLLM_SERVER_DEV_MODE=1, as the server tier starts it)",
    )
    p.add_argument("--check", action="append", choices=[c for c, _ in STEPS], help="run only these")
    return p


def main(argv: list[str] | None = None) -> int:
    from omnitts.validators.backends.workers import collective_rpc
    from omnitts.validators.engine.probe import Probe, ProbeError

    args = parser().parse_args(argv)
    try:
        probe = Probe(
            args.url,
            args.model,
            args.out,
            timeout=args.timeout,
            bad_timeout=args.bad_timeout,
            concurrency=args.concurrency,
            seed=args.seed,
            extra=args.extra,
            sample_rate=args.sample_rate,
            av_python=args.av_python,
            api_key=args.api_key,
            rpc=(lambda method: collective_rpc(args.url, method)) if args.worker_rpc else None,
        )
        report = probe.run(set(args.check) if args.check else None)
    except ProbeError as exc:
        say(exc)
        return 2
    except MemoryError:
        say("out of memory")
        return 2
    except Exception as exc:  # noqa: BLE001 - fail closed: an internal error is one line and exit 2, not a traceback
        say(f"internal error: {type(exc).__name__}: {exc}")
        return 2
    for r in report["results"]:
        print(f"{'PASS' if r['passed'] else 'FAIL'} {r['check']:<26} {r['message']}")
    print(f"report: {args.out / 'report.md'} ({'PASS' if report['passed'] else 'FAIL'})")
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
