{{cookiecutter.license_header}}
"""Gradio demo for {{cookiecutter.camel}} with streaming playback over /v1/audio/speech.

Start the server first (run_server.sh), then: python gradio_demo.py --api-base http://localhost:8091
"""

from __future__ import annotations

import argparse

import gradio as gr
import httpx
import numpy as np

SAMPLE_RATE = {{cookiecutter.sample_rate}}


def stream_speech(api_base: str, model: str, text: str):
    """Yield (sample_rate, int16 chunk) as PCM arrives, so the browser plays while generating."""
    payload = {"model": model, "input": text, "stream": True, "response_format": "pcm"}
    pending = b""
    with httpx.Client(timeout=300.0) as client:
        with client.stream("POST", f"{api_base}/v1/audio/speech", json=payload) as response:
            response.raise_for_status()
            for chunk in response.iter_bytes():
                pending += chunk
                usable = len(pending) - len(pending) % 2
                if usable:
                    yield SAMPLE_RATE, np.frombuffer(pending[:usable], dtype=np.int16)
                    pending = pending[usable:]


def build_demo(api_base: str, model: str) -> gr.Blocks:
    with gr.Blocks(title="{{cookiecutter.camel}} TTS") as demo:
        gr.Markdown("# {{cookiecutter.camel}} text-to-speech (streaming)")
        text = gr.Textbox(label="Text", value="Hello from vLLM-Omni.")
        audio = gr.Audio(label="Speech", streaming=True, autoplay=True)

        def speak(value: str):
            yield from stream_speech(api_base, model, value)

        gr.Button("Speak").click(speak, text, audio)
    return demo


def main() -> None:
    parser = argparse.ArgumentParser(description="{{cookiecutter.camel}} Gradio demo")
    parser.add_argument("--api-base", default="http://localhost:8091")
    parser.add_argument("--model", default="{{cookiecutter.hf_repo}}")
    parser.add_argument("--host", default="127.0.0.1", help="interface to serve on; 0.0.0.0 for every interface")
    parser.add_argument("--port", type=int, default=7860)
    args = parser.parse_args()
    build_demo(args.api_base, args.model).queue().launch(server_name=args.host, server_port=args.port)


if __name__ == "__main__":
    main()
