"""``omnitts-probe --url http://HOST:PORT --model NAME [--out DIR]``: the server checks against a running server."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


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
    from omnitts.validators.engine.probe import Probe

    p = argparse.ArgumentParser(
        prog="omnitts-probe",
        description="Check a running /v1/audio/speech server (any model): response formats, streaming (I1), "
        "concurrency (I4), bad requests, TTFP/RTF/underrun. Writes report.json, report.md and each request's WAV.",
    )
    p.add_argument("--url", required=True, help="the server, http://HOST:PORT")
    p.add_argument("--model", required=True, help="the served model name (as /v1/models lists it)")
    p.add_argument("--out", type=Path, default=Path("omnitts-probe"), help="report folder (default ./omnitts-probe)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds one request may take (default 120)")
    p.add_argument("--bad-timeout", type=float, default=30.0, help="seconds a bad request may take (default 30)")
    p.add_argument("--concurrency", type=_levels, default=(1, 4, 8), help="perf levels (default 1,4,8)")
    p.add_argument("--seed", type=int, default=None, help="send this `seed` with every request (determinism)")
    p.add_argument("--extra", type=_extra, default={}, help="JSON fields added to every request, e.g. a voice")
    p.add_argument("--sample-rate", type=int, default=None, help="pcm sample rate when the server offers no wav")
    p.add_argument("--av-python", default=None, help="a Python with PyAV to decode mp3/opus when this one lacks it")
    p.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY"), help="bearer token (default $OPENAI_API_KEY)")
    p.add_argument("--check", action="append", choices=[c for c, _, _ in Probe.STEPS], help="run only these")
    return p


def main(argv: list[str] | None = None) -> int:
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
        )
        report = probe.run(set(args.check) if args.check else None)
    except ProbeError as exc:
        print(f"omnitts-probe: {exc}", file=sys.stderr)
        return 2
    for r in report["results"]:
        print(f"{'PASS' if r['passed'] else 'FAIL'} {r['check']:<26} {r['message']}")
    print(f"report: {args.out / 'report.md'} ({'PASS' if report['passed'] else 'FAIL'})")
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
