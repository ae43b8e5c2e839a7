{{cookiecutter.license_header}}
"""{{cookiecutter.camel}} pipeline topology (frozen).
{% if cookiecutter.pattern == "two-stage" %}
Two-stage TTS: the AR talker ({{cookiecutter.stage_key}}) predicts codec frames, the codec decoder
({{cookiecutter.decoder_stage_key}}) turns them into audio. Chunked (async_chunk) vs end-to-end decoding
is chosen by ``async_chunk`` in ``vllm_omni/deploy/{{cookiecutter.model_type}}.yaml``.
{% elif cookiecutter.pattern == "single-stage" %}
Single-stage TTS: text -> waveform inside one AR worker; ``{{cookiecutter.camel}}ForGeneration.forward()``
steps a per-request ``inference_stream()`` generator and yields one audio chunk per forward.
{% else %}
Single-stage, vLLM-native AR: the base LM runs as a normal AR stage; the side computation (flow head +
decoder) runs in the runner's post-processing hook and emits one audio delta per step.
{% endif %}"""

from vllm_omni.config.stage_config import (
    PipelineConfig,
    StageExecutionType,
    StagePipelineConfig,
)
{% if cookiecutter.pattern == "two-stage" %}
_PROC = "vllm_omni.model_executor.stage_input_processors.{{cookiecutter.name}}"
{% endif %}
{{cookiecutter.model_type.upper()}}_PIPELINE = PipelineConfig(
    model_type="{{cookiecutter.model_type}}",
    model_arch="{{cookiecutter.arch}}",
    stages=(
        StagePipelineConfig(
            stage_id=0,
            model_stage="{{cookiecutter.stage_key}}",
            execution_type=StageExecutionType.LLM_AR,
            input_sources=(),
{%- if cookiecutter.pattern == "two-stage" %}
            owns_tokenizer=True,
            engine_output_type="latent",
            async_chunk_process_next_stage_input_func=f"{_PROC}.talker2code2wav_async_chunk",
{%- else %}
            final_output=True,
            final_output_type="audio",
            owns_tokenizer=True,
            engine_output_type="audio",
{%- endif %}
            sampling_constraints={
                "detokenize": False,
                # compute_logits() emits this id when the request's audio is complete.
                "stop_token_ids": [{{cookiecutter.eos_token_id}}],
            },
        ),
{%- if cookiecutter.pattern == "two-stage" %}
        StagePipelineConfig(
            stage_id=1,
            model_stage="{{cookiecutter.decoder_stage_key}}",
            execution_type=StageExecutionType.LLM_GENERATION,
            input_sources=(0,),
            final_output=True,
            final_output_type="audio",
            engine_output_type="audio",
            model_arch="{{cookiecutter.decoder_arch}}",
            sync_process_input_func=f"{_PROC}.talker2code2wav",
        ),
{%- endif %}
    ),
)
