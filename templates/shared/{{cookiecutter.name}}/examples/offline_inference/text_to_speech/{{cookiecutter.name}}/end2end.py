{{cookiecutter.license_header}}
"""Offline inference example for {{cookiecutter.camel}} via vLLM-Omni.

Usage:
  python examples/offline_inference/text_to_speech/{{cookiecutter.name}}/end2end.py \
    --model {{cookiecutter.hf_repo}} --text "Hello from vLLM-Omni."

The deploy config ``vllm_omni/deploy/{{cookiecutter.model_type}}.yaml`` is loaded automatically
(override with ``--deploy-config``).
"""

from __future__ import annotations

import os
from pathlib import Path

import soundfile as sf
import torch
from vllm import SamplingParams
from vllm.utils.argparse_utils import FlexibleArgumentParser

os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")

from vllm_omni import Omni  # noqa: E402

MODEL = "{{cookiecutter.hf_repo}}"


def build_request(text: str, max_new_tokens: int | None = None) -> dict:
    """One request; every additional_information value is list-wrapped, as the engine expects."""
    additional: dict = {"text": [text]}
    if max_new_tokens is not None:
        additional["max_new_tokens"] = [max_new_tokens]
    # The text is the prompt: the engine tokenizes it, and the model's input_ids carry it.
    return {"prompt": text, "additional_information": additional}


def as_waveform(audio) -> torch.Tensor:
    """The audio output is a Tensor, or a list of chunks before consolidation (invariant I2)."""
    if isinstance(audio, list):
        return torch.cat([torch.as_tensor(a).reshape(-1) for a in audio], dim=0)
    return torch.as_tensor(audio).reshape(-1)


def completions(output) -> list:
{%- if cookiecutter.flat_request_output %}
    """The completions of one item of Omni.generate(): an OmniRequestOutput, which is a vLLM RequestOutput."""
    return output.outputs
{%- else %}
    """The completions of one item of Omni.generate(): its stage's RequestOutput is `.request_output`."""
    return output.request_output.outputs if output.request_output is not None else []
{%- endif %}


def main(args) -> None:
    omni = Omni(model=args.model, deploy_config=args.deploy_config, stage_init_timeout=args.stage_init_timeout)
    sampling_params = SamplingParams(temperature=0.0, max_tokens=2048, seed=args.seed, detokenize=False)
    # Omni takes one SamplingParams per stage: these for the first, the deploy config's defaults for the others.
    sampling_params_list = [sampling_params, *omni.default_sampling_params_list[1:]]
    output_dir = Path(args.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)

    inputs = build_request(args.text, args.max_new_tokens)
    for i, output in enumerate(omni.generate(inputs, sampling_params_list)):
        for j, out in enumerate(completions(output)):
            mm = out.multimodal_output
            if mm is None or mm.get("audio") is None:
                print(f"  [req {i}] no audio output")
                continue
            waveform = as_waveform(mm["audio"]).float().cpu()
            sr_value = mm.get("sr")
            if isinstance(sr_value, list):
                sr_value = sr_value[-1]
            sr = int(sr_value) if sr_value is not None else {{cookiecutter.sample_rate}}
            path = output_dir / f"output_{i}_{j}.wav"
            sf.write(str(path), waveform.numpy(), sr)
            print(f"  saved {path} ({waveform.numel() / sr:.2f} s at {sr} Hz)")


def parse_args():
    parser = FlexibleArgumentParser(description="{{cookiecutter.camel}} offline inference")
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--text", default="Hello from vLLM-Omni.")
    parser.add_argument("--max-new-tokens", type=int, default=None)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--output-dir", default="output_audio")
    parser.add_argument("--deploy-config", default=None)
    parser.add_argument("--stage-init-timeout", type=int, default=300)
    return parser.parse_args()


if __name__ == "__main__":
    main(parse_args())
