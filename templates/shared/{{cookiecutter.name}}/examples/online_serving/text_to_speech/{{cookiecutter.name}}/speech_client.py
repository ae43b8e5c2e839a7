{{cookiecutter.license_header}}
"""Client for {{cookiecutter.camel}} served at /v1/audio/speech.

Usage:
  python speech_client.py --text "Hello" --output out.wav
  python speech_client.py --text "Hello" --stream --output out.pcm   # streaming PCM
"""

from __future__ import annotations

import argparse

import httpx


def main() -> None:
    parser = argparse.ArgumentParser(description="{{cookiecutter.camel}} speech client")
    parser.add_argument("--api-base", default="http://localhost:8091")
    parser.add_argument("--model", default="{{cookiecutter.hf_repo}}")
    parser.add_argument("--text", default="Hello from vLLM-Omni.")
    parser.add_argument("--response-format", default="wav", choices=["wav", "mp3", "flac", "pcm"])
    parser.add_argument("--stream", action="store_true", help="stream raw PCM chunks as they are generated")
    parser.add_argument("--output", default="output.wav")
    args = parser.parse_args()

    payload = {"model": args.model, "input": args.text, "response_format": args.response_format}
    if args.stream:
        payload |= {"stream": True, "response_format": "pcm"}
    url = f"{args.api_base}/v1/audio/speech"
    with httpx.Client(timeout=300.0) as client, open(args.output, "wb") as fh:
        with client.stream("POST", url, json=payload) as response:
            response.raise_for_status()
            total = 0
            for chunk in response.iter_bytes():
                fh.write(chunk)
                total += len(chunk)
    print(f"wrote {total} bytes to {args.output}")


if __name__ == "__main__":
    main()
