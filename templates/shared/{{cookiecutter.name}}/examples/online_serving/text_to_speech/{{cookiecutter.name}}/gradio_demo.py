{{cookiecutter.license_header}}
"""Gradio demo for {{cookiecutter.camel}} with streaming playback over /v1/audio/speech.

Start the server first (run_server.sh), then: python gradio_demo.py --api-base http://localhost:8091
Needs `pip install gradio httpx` and ffmpeg on PATH (Gradio encodes streamed audio for the browser with it).
"""

from __future__ import annotations

import argparse
import base64
import json
import shutil
import sys

import gradio as gr
import httpx
import numpy as np

SAMPLE_RATE = {{cookiecutter.sample_rate}}


def pcm_bytes(response: httpx.Response):
    """The PCM bytes of a streamed /v1/audio/speech response, as they arrive.

    ``"stream": true`` answers raw ``audio/pcm`` bytes on some releases and OpenAI ``speech.audio.delta`` SSE
    events (base64 audio) on others; the response's content type says which, so this demo runs on both.
    """
    if not response.headers.get("content-type", "").startswith("text/event-stream"):
        yield from response.iter_bytes()
        return
    for line in response.iter_lines():
        if not line.startswith("data:"):
            continue
        event = json.loads(line[len("data:") :])
        if event.get("type") == "speech.audio.delta":
            yield base64.b64decode(event["audio"])
        elif event.get("type") == "speech.audio.error":
            raise gr.Error(event.get("error", {}).get("message", "speech generation failed"))


def stream_speech(api_base: str, model: str, text: str):
    """Yield (sample_rate, int16 chunk) as PCM arrives, so the browser plays while generating."""
    payload = {"model": model, "input": text, "stream": True, "response_format": "pcm"}
    pending = b""
    with httpx.Client(timeout=300.0) as client:
        with client.stream("POST", f"{api_base}/v1/audio/speech", json=payload) as response:
            if response.is_error:
                response.read()
                raise gr.Error(f"server answered {response.status_code}: {response.text[:500]}")
            for chunk in pcm_bytes(response):
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
    if shutil.which("ffmpeg") is None:
        # Without it the page loads but every Speak ends in "Error": Gradio encodes streamed audio with ffmpeg.
        sys.exit("gradio_demo.py: streaming playback needs ffmpeg on PATH (e.g. apt-get install ffmpeg)")
    build_demo(args.api_base, args.model).queue().launch(server_name=args.host, server_port=args.port)


if __name__ == "__main__":
    main()
