#!/bin/bash
# Start the server in the background, wait for /health, then launch the Gradio demo.
set -e

MODEL="${MODEL:-{{cookiecutter.hf_repo}}}"
PORT="${PORT:-8091}"
GRADIO_PORT="${GRADIO_PORT:-7860}"
HERE="$(cd "$(dirname "$0")" && pwd)"

vllm serve "$MODEL" --host 0.0.0.0 --port "$PORT" --omni &
SERVER_PID=$!
trap 'kill $SERVER_PID 2>/dev/null || true' EXIT

until curl -sf "http://localhost:${PORT}/health" > /dev/null; do
    sleep 2
done

python "$HERE/gradio_demo.py" --api-base "http://localhost:${PORT}" --model "$MODEL" --port "$GRADIO_PORT"
