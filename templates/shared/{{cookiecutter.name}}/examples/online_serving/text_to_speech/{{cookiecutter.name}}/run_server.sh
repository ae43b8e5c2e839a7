#!/bin/bash
# Launch the vLLM-Omni server for {{cookiecutter.camel}}; the deploy yaml loads automatically.
set -e

MODEL="${MODEL:-{{cookiecutter.hf_repo}}}"
PORT="${PORT:-8091}"

vllm serve "$MODEL" --host 0.0.0.0 --port "$PORT" --omni
