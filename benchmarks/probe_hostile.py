"""omnitts-probe against two hostile servers, before and after its bounds: peak memory against a flood, time on an
SSE body without event separators.

A loopback server (this script, ``--serve``, in its own process) answers ``/v1/models`` and ``/openapi.json`` as a
speech server does, and then:
- ``flood``: every non-streamed speech answer is ``--flood-mb`` MB of bytes (200, ``audio/wav``, no Content-Length:
  the body ends when the connection closes); the probe runs ``--check server.response_formats``;
- ``sse``: an SSE-only server (no ``stream_format``) whose streams are one ``data:`` line of N MB that never ends
  (one run per size of ``--sse-mb``); the probe runs ``--check perf.rtf_ttfa --concurrency 1``.
Each probe is a fresh ``python -m omnitts.validators.engine.probe_cli`` process, timed (wall) and measured (peak RSS,
``os.wait4``); "before" is the code of ``--before`` (default 48a4d6c), extracted with ``git archive`` and put first on
PYTHONPATH; "after" is this checkout. The peer measured in the same run is the same probe against a correct server
(``good``: the same check, small valid answers), so each row says how much the hostile server costs on top.

The after parser alone (``--parsers``): ``validators/backends/sse.parse`` on the reads of a separator-less body of N
MB, read by its own client in a fresh process (past the probe's bound, to show the parse is linear however much is
read). The before parser is timed only inside the probe (the rows above): alone in a fresh process CPython grows its
buffer in place and hides the quadratic cost that the probe's own process pays.

    python benchmarks/probe_hostile.py --out benchmarks/results/probe_hostile.md
    python benchmarks/probe_hostile.py --flood-mb 1024 --sse-mb 5,10,20,50 --parsers 10,50,100
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("console", "knowledge", "scaffold", "validators", "reference_models", "templates")
MB = 1 << 20
MODEL = "hostile"
SR = 16000


# ---------------------------------------------------------------------------------------------- the server
def _wav() -> bytes:
    import numpy as np
    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, (0.3 * np.sin(np.arange(SR) / 8)).astype("float32"), SR, format="WAV", subtype="PCM_16")
    return buf.getvalue()


def serve(mode: str, size: int, port_file: Path) -> None:
    wav = _wav()
    props = {"input": {"type": "string"}, "response_format": {"enum": ["wav", "pcm"]}, "stream": {"type": "boolean"}}
    schema = {"paths": {"/v1/audio/speech": {}}, "components": {"schemas": {"SpeechRequest": {"properties": props}}}}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def send(self, status: int, ctype: str, body: bytes | None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            if body is not None:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if body is not None:
                self.wfile.write(body)

        def flood(self, ctype: str, prefix: bytes) -> None:
            self.send(200, ctype, None)
            block, sent = b"A" * MB, 0
            try:
                self.wfile.write(prefix)
                while sent < size:
                    self.wfile.write(block[: size - sent])
                    sent += min(MB, size - sent)
            except OSError:
                pass

        def do_GET(self):
            if self.path == "/v1/models":
                return self.send(200, "application/json", json.dumps({"data": [{"id": MODEL}]}).encode())
            if self.path == "/openapi.json":
                return self.send(200, "application/json", json.dumps(schema).encode())
            self.send(404, "application/json", b'{"detail": "Not Found"}')

        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            if mode == "flood" and not req.get("stream"):
                return self.flood("audio/wav", b"")
            if mode == "sse" and req.get("stream"):
                return self.flood("text/event-stream", b"data: ")
            if req.get("stream"):  # a correct SSE stream of the short wav's samples
                import base64

                self.send(200, "text/event-stream", None)
                pcm = wav[44:]
                for i in range(0, len(pcm), 3200):
                    data = json.dumps(
                        {"type": "speech.audio.delta", "audio": base64.b64encode(pcm[i : i + 3200]).decode()}
                    )
                    self.wfile.write(f"event: speech.audio.delta\ndata: {data}\n\n".encode())
                return self.wfile.write(b'event: speech.audio.done\ndata: {"type": "speech.audio.done"}\n\n')
            fmt = req.get("response_format", "wav")
            self.send(200, f"audio/{fmt}", wav if fmt == "wav" else wav[44:])

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    port_file.write_text(str(httpd.server_address[1]))
    httpd.serve_forever()


class Server:
    def __init__(self, mode: str, size: int, tmp: Path) -> None:
        port_file = tmp / f"port-{mode}-{time.monotonic_ns()}"
        argv = [sys.executable, __file__, "--serve", mode, "--size", str(size), "--port-file", str(port_file)]
        self.proc = subprocess.Popen(argv)
        deadline = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("the hostile server did not start")
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{port_file.read_text()}"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(10)


# ---------------------------------------------------------------------------------------------- measuring
def old_tree(rev: str, tmp: Path) -> Path:
    """The code of ``rev`` importable as ``omnitts`` (a package folder of links to the extracted tree)."""
    src, pkg = tmp / "src", tmp / "pkg" / "omnitts"
    src.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for root in ROOTS:
        if (src / root).exists():
            (pkg / root).symlink_to(src / root)
    return pkg.parent


def probe(url: str, args: list[str], out: Path, pythonpath: Path | None) -> dict:
    """One probe process: wall seconds, peak RSS (MiB), exit status, its last output line."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = str(pythonpath)
    argv = [sys.executable, "-m", "omnitts.validators.engine.probe_cli", "--url", url, "--model", MODEL]
    argv += ["--out", str(out), *args]
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=out.parent)
    output: list[bytes] = []
    reader = threading.Thread(target=lambda: output.append(proc.stdout.read()), daemon=True)
    reader.start()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    reader.join(10)
    text = b"".join(output).decode("utf-8", "replace").strip().splitlines()
    failing = [
        " ".join(text[i : i + 2]) if line.endswith(":") else line  # a verdict's findings follow its first line
        for i, line in enumerate(text)
        if line.startswith(("FAIL", "omnitts-probe:"))
    ]
    return {
        "seconds": round(seconds, 2),
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),  # Linux: KiB
        "exit": proc.returncode,
        "says": (failing or text or [""])[0][:300],
    }


# the after parser in its own process: the body read by its client (64 KiB reads, the answer held), then one parse
_PARSE = """
import sys, time
from omnitts.validators.backends.http import Bound, send
from omnitts.validators.backends.sse import parse
url, size = sys.argv[1], int(sys.argv[2])
body = {"model": "hostile", "input": "x", "stream": True}
answer = send(url, "POST", "/v1/audio/speech", body, timeout=600, bound=Bound(size + (1 << 20), "benchmark"))
assert answer.error is None and len(answer.body) >= size, answer.error
started = time.perf_counter()
parse(answer.reads)
print(round(time.perf_counter() - started, 3))
"""


def parsers(sizes_mb: list[int], tmp: Path) -> list[dict]:
    rows = []
    for size in sizes_mb:
        with Server("sse", size * MB, tmp) as server:
            argv = [sys.executable, "-c", _PARSE, server.url, str(size * MB)]
            proc = subprocess.run(argv, capture_output=True, text=True)
        seconds = float(proc.stdout.strip()) if proc.returncode == 0 else None
        row = {"mb": size, "after_s": seconds, "s_per_mb": round(seconds / size, 4) if seconds else None}
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--serve", choices=("flood", "sse", "good"), help=argparse.SUPPRESS)
    p.add_argument("--size", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--port-file", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--before", default="48a4d6c", help="the code before (a git revision; '' for none)")
    p.add_argument("--flood-mb", type=int, default=1024)
    p.add_argument("--sse-mb", default="5,10,20,50", help="sizes of the SSE body, MB (default 5,10,20,50)")
    p.add_argument("--flood-timeout", type=float, default=120.0, help="--timeout for the flood (default: the probe's)")
    p.add_argument("--sse-timeout", type=float, default=5.0, help="--timeout for the SSE body (default 5)")
    p.add_argument("--parsers", default="10,50,100", help="MB sizes for the after parser alone ('' for none)")
    p.add_argument("--out", type=Path, help="write the results as Markdown (and JSON beside it)")
    p.add_argument("--render", type=Path, help="only write --out's Markdown again from this JSON of an earlier run")
    args = p.parse_args()
    if args.serve:
        serve(args.serve, args.size, args.port_file)
        return 0
    if args.render:
        results = json.loads(args.render.read_text())
        vars(args).update(results["args"])
        args.out.write_text(markdown(results, args))
        return 0

    shown = ("before", "flood_mb", "sse_mb", "flood_timeout", "sse_timeout", "parsers")
    results = {"python": platform.python_version(), "load": os.getloadavg()[0], "rows": []}
    results["args"] = {k: getattr(args, k) for k in shown}
    with tempfile.TemporaryDirectory(prefix="probe-hostile-") as tmp_name:
        tmp = Path(tmp_name)
        codes = {"after": None}
        if args.before:
            codes = {"before": old_tree(args.before, tmp / "before"), "after": None}
        flood = ["--check", "server.response_formats", "--timeout", f"{args.flood_timeout:g}"]
        sse = ["--check", "perf.rtf_ttfa", "--concurrency", "1", "--timeout", f"{args.sse_timeout:g}"]
        runs = [("flood", "good", 0, flood), ("flood", "flood", args.flood_mb, flood), ("sse", "good", 0, sse)]
        runs += [("sse", "sse", int(mb), sse) for mb in args.sse_mb.split(",") if mb.strip()]
        for case, server_mode, size_mb, check in runs:
            for code, path in codes.items():
                with Server(server_mode, size_mb * MB, tmp) as server:
                    out = tmp / f"out-{case}-{code}-{server_mode}-{size_mb}"
                    row = probe(server.url, check, out, path)
                row.update(case=case, code=code, server=server_mode, size_mb=size_mb)
                print(json.dumps(row), flush=True)
                results["rows"].append(row)
        sizes = [int(s) for s in args.parsers.split(",") if s.strip()]
        results["parsers"] = parsers(sizes, tmp) if sizes else []
    if args.out:
        args.out.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n")
        args.out.write_text(markdown(results, args))
    return 0


def markdown(results: dict, args) -> str:
    lines = [
        "# omnitts-probe against hostile servers: peak memory and time, before and after",
        "",
        f"`python benchmarks/probe_hostile.py --flood-mb {args.flood_mb} --sse-mb {args.sse_mb} "
        f"--flood-timeout {args.flood_timeout:g} --sse-timeout {args.sse_timeout:g} --before {args.before} "
        f"--parsers {args.parsers}` (Python {results['python']}, load average {results['load']:.1f} at the start, "
        "on the shared 2-core box). Each row is one fresh probe process; peak RSS from `os.wait4`; `good` is the "
        "same check against a correct server (the peer); `flood` answers every non-streamed speech request with N MB "
        "(checked: `server.response_formats`, `--timeout` = flood timeout); `sse` streams one `data:` line of N MB "
        "that never ends (checked: `perf.rtf_ttfa --concurrency 1`, `--timeout` = SSE timeout).",
        "",
        "| case | server | body MB | code | wall s | x good | peak RSS MiB | x good | exit | what the probe says |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    peers = {(r["case"], r["code"]): r for r in results["rows"] if r["server"] == "good"}
    for r in results["rows"]:
        says = r["says"].replace("|", "\\|")
        size = r["size_mb"] or "small"
        peer = peers.get((r["case"], r["code"]), r)
        slower, bigger = r["seconds"] / peer["seconds"], r["peak_rss_mib"] / peer["peak_rss_mib"]
        lines.append(
            f"| {r['case']} | {r['server']} | {size} | {r['code']} | {r['seconds']} | {slower:.1f}x "
            f"| {r['peak_rss_mib']} | {bigger:.1f}x | {r['exit']} | {says} |"
        )
    hostile = {(r["case"], r["size_mb"], r["code"]): r for r in results["rows"] if r["server"] != "good"}
    pairs = [(k[:2], hostile[k], hostile.get((*k[:2], "after"))) for k in hostile if k[2] == "before"]
    if pairs:
        lines += ["", "Before / after, same server, same run:", ""]
        for (case, size), before, after in pairs:
            if after:
                lines.append(
                    f"- {case} {size} MB: wall {before['seconds']} s -> {after['seconds']} s "
                    f"({before['seconds'] / after['seconds']:.0f}x), peak RSS {before['peak_rss_mib']} MiB -> "
                    f"{after['peak_rss_mib']} MiB ({before['peak_rss_mib'] / after['peak_rss_mib']:.0f}x)"
                )
    if results["parsers"]:
        lines += [
            "",
            "The after SSE parser alone on `data: ` + N MB without a line end (read by its client in a fresh process, "
            "no bound), seconds of one parse:",
            "",
            "| MB | seconds | s per MB |",
            "|---|---|---|",
        ]
        for r in results["parsers"]:
            lines.append(f"| {r['mb']} | {r['after_s']} | {r['s_per_mb']} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
