#!/bin/bash
# Launch the vLLM-Omni server for {{cookiecutter.camel}}; the deploy yaml loads automatically.
# It listens on 127.0.0.1 only; HOST=0.0.0.0 serves on every interface (anyone who can reach this machine).
set -e

MODEL="${MODEL:-{{cookiecutter.hf_repo}}}"
PORT="${PORT:-8091}"
HOST="${HOST:-127.0.0.1}"

vllm serve "$MODEL" --host "$HOST" --port "$PORT" --omni
