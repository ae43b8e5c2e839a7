#!/bin/bash
# Start the server in the background, wait for /health, then launch the Gradio demo.
# Both listen on 127.0.0.1 only; HOST=0.0.0.0 serves both on every interface (anyone who can reach this machine).
set -e

MODEL="${MODEL:-{{cookiecutter.hf_repo}}}"
PORT="${PORT:-8091}"
GRADIO_PORT="${GRADIO_PORT:-7860}"
HOST="${HOST:-127.0.0.1}"
HERE="$(cd "$(dirname "$0")" && pwd)"
if [ "$HOST" = "0.0.0.0" ]; then API_HOST=127.0.0.1; else API_HOST="$HOST"; fi

vllm serve "$MODEL" --host "$HOST" --port "$PORT" --omni &
SERVER_PID=$!
trap 'kill $SERVER_PID 2>/dev/null || true' EXIT

until curl -sf "http://${API_HOST}:${PORT}/health" > /dev/null; do
    sleep 2
done

python "$HERE/gradio_demo.py" --api-base "http://${API_HOST}:${PORT}" --model "$MODEL" --host "$HOST" --port "$GRADIO_PORT"
