"""``omnitts-serve``: the tree's own ``vllm-omni serve`` for one of its models, on 127.0.0.1, until Ctrl-C.

It starts the server exactly as the server tier does (``runtime.Server``): the engine's Python
(``install.engine_python``: the contributor's environment, or the cached CPU engine environment with omnitts's CPU
platform), the tree and omnitts's overlay on ``PYTHONPATH``, the engine's ``VLLM_*`` variables, and the model
directory the engine tier uses (the tiny scaffolded model's, built once and cached, or ``--checkpoint``). Once the
server answers it prints the URL and the model id that ``omnitts-probe`` and the generated Gradio demo take, and
the server log's path. Stopping it (Ctrl-C, SIGTERM) stops every engine process it started.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from pathlib import Path

from omnitts.validators.engine.install import ENGINE_PYTHON_OPTION, ENGINE_PYTHON_VAR, EngineEnvError

DEMO = Path("examples/online_serving/text_to_speech")


class ServeError(RuntimeError):
    """Bad input or a server that would not start; the message is the one line to print."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="omnitts-serve", description=__doc__.splitlines()[0])
    p.add_argument("--omni-root", type=Path, default=Path("."), help="the vLLM-Omni tree (default: .)")
    p.add_argument("--model", required=True, help="the model, as named in the tree (models/<NAME>/)")
    p.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--release", default=None, help="vLLM-Omni release (default: the tree's)")
    p.add_argument("--checkpoint", type=Path, default=None, help="serve this model directory as it is")
    p.add_argument("--dummy-weights", action="store_true", help="start with vLLM's load_format=dummy")
    p.add_argument(ENGINE_PYTHON_OPTION, dest="engine_python", help=f"the engine's Python (or ${ENGINE_PYTHON_VAR})")
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds the server may take to start (default $OMNITTS_ENGINE_TIMEOUT, else 600)",
    )
    p.add_argument("--log-dir", type=Path, default=None, help="where the server log goes (default: a temp folder)")
    return p


def _release(tree: Path, given: str | None) -> str:
    from omnitts.knowledge.layout import tree_version

    release = given or tree_version(tree)
    if release is None:
        raise ServeError(f"cannot read the release of {tree}: pass --release X.Y.Z")
    return release


def _check_model(tree: Path, model: str) -> None:
    from omnitts.knowledge.layout import MODELS

    models = tree / MODELS
    if not (models / model).is_dir():
        known = sorted(p.name for p in models.iterdir() if p.is_dir() and not p.name.startswith("_"))
        import difflib

        near = difflib.get_close_matches(model, known, n=1)
        hint = f"; did you mean {near[0]}?" if near else ""
        raise ServeError(f"--model {model}: no such model in {tree} ({models} holds {len(known)}){hint}")


def _named_server(name: str):
    """``runtime.Server`` that serves the model directory under ``name`` (``--served-model-name``): the id the probe and
    the demo are given is the model's name, not a cache path (the server's own start-up bounds follow ``--timeout``,
    as ``Server.start`` raises them)."""
    from omnitts.validators.engine.runtime import Server

    class NamedServer(Server):
        def command(self) -> list[str]:
            return [*super().command(), "--served-model-name", name]

    return NamedServer


def start(args: argparse.Namespace):
    """(server, model_dir, model_id): the server up and answering, or ServeError."""
    from omnitts.validators.backends.http import send
    from omnitts.validators.engine.runtime import EngineEnv, EngineError, free_port
    from omnitts.validators.engine.session import engine_kwargs, model_dir_cache

    tree = args.omni_root.resolve()
    if not (tree / "vllm_omni").is_dir():
        raise ServeError(f"--omni-root {args.omni_root}: not a vLLM-Omni tree (no vllm_omni/)")
    if args.checkpoint is None:
        _check_model(tree, args.model)
    elif not (args.checkpoint / "config.json").is_file():
        raise ServeError(f"--checkpoint {args.checkpoint}: no config.json in it")
    release = _release(tree, args.release)
    if args.log_dir is not None:
        args.log_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"omnitts-serve-{args.model}-", dir=args.log_dir))
    try:
        env = EngineEnv.prepare(tree, release, work, python=args.engine_python)
        if args.checkpoint is not None:
            model_dir = args.checkpoint.resolve()
        else:
            model_dir = env.model_dir(args.model, model_dir_cache(tree, args.model, release))
        server = _named_server(args.model)(
            env,
            model_dir,
            work / "server.log",
            engine_kwargs=engine_kwargs("dummy" if args.dummy_weights else None, model_dir),
            port=args.port or free_port(),
        )
        try:
            server.start(timeout=args.timeout)
        except BaseException:  # Ctrl-C while it starts: no engine process outlives the command
            server.stop()
            raise
    except (EngineEnvError, EngineError) as exc:
        raise ServeError(str(exc)) from None
    answer = send(server.url, "GET", "/v1/models", timeout=30)
    ids = [m.get("id") for m in answer.json().get("data", [])] if answer.ok else []
    return server, model_dir, (ids[0] if ids else str(model_dir))


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.timeout is None:
        from omnitts.validators.engine.pytest_options import engine_timeout_default

        try:
            args.timeout = engine_timeout_default()
        except Exception as exc:  # pytest.UsageError: the one line
            print(f"omnitts-serve: {exc}", file=sys.stderr)
            return 2
    started = time.monotonic()
    try:
        server, model_dir, model_id = start(args)
    except ServeError as exc:
        print(f"omnitts-serve: {exc}", file=sys.stderr)
        return 1
    stop = {"signal": None}

    def _stop(signum, frame):
        stop["signal"] = signum

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    demo = args.omni_root / DEMO / args.model / "gradio_demo.py"
    lines = [
        f"omnitts-serve: {args.model} is served at {server.url} (up in {time.monotonic() - started:.0f} s)",
        f"url: {server.url}",
        f"model: {model_id}",
        f"log: {server.log}",
        f"probe: omnitts-probe --url {server.url} --model {model_id}",
    ]
    if demo.is_file():
        lines.append(f"demo: python {demo} --api-base {server.url} --model {model_id}")
    lines.append("Ctrl-C stops the server")
    print("\n".join(lines), flush=True)
    try:
        while stop["signal"] is None and server.proc.poll() is None:
            time.sleep(0.5)
    finally:
        server.stop()
    if stop["signal"] is None:  # the server ended by itself
        print(f"omnitts-serve: the server exited with {server.proc.returncode}; log: {server.log}", file=sys.stderr)
        return 1
    print(f"omnitts-serve: stopped; log: {server.log}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
