{{ cookiecutter.license_header }}
"""Stage 0 of {{ cookiecutter.camel }}: the AR talker (text tokens -> one frame of K codec codes per step).

Each step the runner schedules one token per request. The talker runs its decoder (RoPE, RMSNorm, grouped-query
attention) over that token with the request's own KV cache, then the code predictor runs an inner AR loop over the
K codebooks of the frame. That inner loop is CUDA-graph capturable: static buffers per batch size, pre-built
positions and masks, greedy argmax, no host synchronisation; other batch sizes fall back to an eager loop.

Per-request state is keyed by the scheduler request id that the runner writes into the request's info dict before
``preprocess()`` (``has_preprocess = True``) and freed by ``on_requests_finished()`` (finish and abort).
"""

{% if cookiecutter.target == "standalone" %}{{ cookiecutter.logger_import }}
{% endif %}import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
{% if cookiecutter.target != "standalone" %}{{ cookiecutter.logger_import }}
{% endif %}
{{ cookiecutter.omni_output_import }}

from .configuration_{{ cookiecutter.name }} import (
    {{ cookiecutter.camel }}Config,
    init_weights_from_seed,
)

{{ cookiecutter.logger_init }}

{% from "decoder_lm.py.j2" import decoder_lm with context %}{{ decoder_lm("TalkerModel", "The talker decoder: token embeddings (text and offset-mapped codec tokens), layers, final norm.") }}


@dataclass
class StaticLoop:
    """Static input/output buffers of the code predictor's loop for one batch size (a CUDA graph replays them)."""

    hidden: torch.Tensor
    frame_idx: torch.Tensor
    target: torch.Tensor
    key: torch.Tensor
    value: torch.Tensor
    codes: torch.Tensor
    stop: torch.Tensor
    graph: Any = None


class {{ cookiecutter.camel }}CodePredictor(nn.Module):
    """Inner AR loop over the K codebooks of one frame, batched over requests.

    Position 0 holds the talker's hidden state, position ``k > 0`` the embedding of code ``k - 1`` (token
    ``audio_token_offset + (k - 1) * codebook_size + code``). Codebook 0 has one extra class, the stop token, whose
    logit gets a duration prior ``stop_ramp * (frame_idx - target)`` (``+1e9`` from ``max_frames`` on).
    Everything inside ``run()`` has static shapes: KV buffers ``[B, kv_heads, K, head_dim]``, RoPE tables and masks
    for positions ``0..K-1`` built once, greedy argmax as the graph-safe sampler, no host synchronisation.
    """

    def __init__(self, config: {{ cookiecutter.camel }}Config) -> None:
        super().__init__()
        self.config = config
        hidden, groups, codebook = config.hidden_size, config.num_code_groups, config.codebook_size
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        self.input_norm = {{ cookiecutter.camel }}RMSNorm(hidden, config.rms_norm_eps)
        self.q_proj = nn.Linear(hidden, self.num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, self.num_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, self.num_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, hidden, bias=False)
        self.post_norm = {{ cookiecutter.camel }}RMSNorm(hidden, config.rms_norm_eps)
        self.mlp = {{ cookiecutter.camel }}MLP(hidden, config.intermediate_size)
        self.out_norm = {{ cookiecutter.camel }}RMSNorm(hidden, config.rms_norm_eps)
        self.heads = nn.ModuleList(nn.Linear(hidden, codebook + 1, bias=False) for _ in range(groups))
        cos, sin = rotary_cos_sin(torch.arange(groups), self.head_dim, config.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.register_buffer("attend", torch.ones(groups, groups, dtype=torch.bool).tril(), persistent=False)
        head_bias = torch.zeros(groups, codebook + 1)
        head_bias[1:, codebook] = float("-inf")
        self.register_buffer("head_bias", head_bias, persistent=False)
        stop_onehot = torch.zeros(codebook + 1)
        stop_onehot[codebook] = 1.0
        self.register_buffer("stop_onehot", stop_onehot, persistent=False)
        self._static_loops: dict[int, StaticLoop] = {}
        self._graph_failed = False

    def run(
        self,
        hidden: torch.Tensor,
        frame_idx: torch.Tensor,
        target: torch.Tensor,
        embed_weight: torch.Tensor,
        key_buf: torch.Tensor,
        value_buf: torch.Tensor,
        codes_out: torch.Tensor,
        stop_out: torch.Tensor,
    ) -> None:
        """The loop itself: writes the frame's codes (``-1`` rows for stopped requests) and stop flags in place."""
        config = self.config
        batch, codebook = hidden.shape[0], config.codebook_size
        groups = self.num_heads // self.num_kv_heads
        stop_bias = torch.where(
            frame_idx >= config.max_frames, 1e9, config.stop_ramp * (frame_idx - target).to(torch.float32)
        )
        x = hidden
        stop = torch.zeros_like(stop_out)
        for k in range(config.num_code_groups):
            h = self.input_norm(x)
            cos, sin = self.rope_cos[k], self.rope_sin[k]
            q = apply_rotary(self.q_proj(h).view(batch, self.num_heads, 1, self.head_dim), cos, sin)
            key_buf[:, :, k : k + 1].copy_(
                apply_rotary(self.k_proj(h).view(batch, self.num_kv_heads, 1, self.head_dim), cos, sin)
            )
            value_buf[:, :, k : k + 1].copy_(self.v_proj(h).view(batch, self.num_kv_heads, 1, self.head_dim))
            keys = key_buf.repeat_interleave(groups, dim=1)
            values = value_buf.repeat_interleave(groups, dim=1)
            scores = (q @ keys.transpose(-1, -2)) / math.sqrt(self.head_dim)
            probs = scores.masked_fill(~self.attend[k], float("-inf")).softmax(dim=-1)
            x = x + self.o_proj((probs @ values).reshape(batch, self.num_heads * self.head_dim))
            x = x + self.mlp(self.post_norm(x))
            logits = self.heads[k](self.out_norm(x)).float() + self.head_bias[k]
            if k == 0:
                logits = logits + stop_bias[:, None] * self.stop_onehot
            code = logits.argmax(dim=-1)
            if k == 0:
                stop = code == codebook
            codes_out[:, k].copy_(code)
            token = config.audio_token_offset + k * codebook + code.clamp(max=codebook - 1)
            x = F.embedding(token, embed_weight)
        codes_out.copy_(torch.where(stop[:, None], -1, codes_out))
        stop_out.copy_(stop)

    def _new_buffers(self, batch: int, like: torch.Tensor) -> dict[str, torch.Tensor]:
        shape = (batch, self.num_kv_heads, self.config.num_code_groups, self.head_dim)
        return {
            "key": torch.zeros(shape, device=like.device, dtype=like.dtype),
            "value": torch.zeros(shape, device=like.device, dtype=like.dtype),
            "codes": torch.zeros(batch, self.config.num_code_groups, device=like.device, dtype=torch.long),
            "stop": torch.zeros(batch, device=like.device, dtype=torch.bool),
        }

    def predict_eager(
        self, hidden: torch.Tensor, frame_idx: torch.Tensor, target: torch.Tensor, embed_weight: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Fresh buffers, eager loop: the fallback for batch sizes without static buffers."""
        buffers = self._new_buffers(hidden.shape[0], hidden)
        self.run(
            hidden, frame_idx, target, embed_weight, buffers["key"], buffers["value"], buffers["codes"], buffers["stop"]
        )
        return buffers["codes"], buffers["stop"]

    def predict(
        self, hidden: torch.Tensor, frame_idx: torch.Tensor, target: torch.Tensor, embed_weight: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Codes ``[B, K]`` and stop flags ``[B]`` of one frame per request."""
        batch = hidden.shape[0]
        if batch not in self.config.cuda_graph_batch_sizes:
            return self.predict_eager(hidden, frame_idx, target, embed_weight)
        loop = self._static_loops.get(batch)
        if loop is None:
            loop = StaticLoop(
                hidden=torch.zeros_like(hidden),
                frame_idx=torch.zeros_like(frame_idx),
                target=torch.zeros_like(target),
                **self._new_buffers(batch, hidden),
            )
            self._static_loops[batch] = loop
        loop.hidden.copy_(hidden)
        loop.frame_idx.copy_(frame_idx)
        loop.target.copy_(target)
        if loop.graph is None and self._graph_enabled(hidden.device):
            loop.graph = self._capture(loop, embed_weight)
        if loop.graph is not None:
            loop.graph.replay()
        else:
            self._run_static(loop, embed_weight)
        return loop.codes.clone(), loop.stop.clone()

    def _run_static(self, loop: StaticLoop, embed_weight: torch.Tensor) -> None:
        self.run(loop.hidden, loop.frame_idx, loop.target, embed_weight, loop.key, loop.value, loop.codes, loop.stop)

    def _graph_enabled(self, device: torch.device) -> bool:
        return (
            self.config.use_cuda_graph
            and device.type == "cuda"
            and not self._graph_failed
            and not torch.cuda.is_current_stream_capturing()
        )

    def _capture(self, loop: StaticLoop, embed_weight: torch.Tensor) -> Any:
        """Warm up on a side stream, then capture ``run()`` on the static buffers; ``None`` keeps it eager."""
        try:
            stream = torch.cuda.Stream(device=loop.hidden.device)
            stream.wait_stream(torch.cuda.current_stream(loop.hidden.device))
            with torch.cuda.stream(stream):
                for _ in range(2):
                    self._run_static(loop, embed_weight)
            torch.cuda.current_stream(loop.hidden.device).wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self._run_static(loop, embed_weight)
            logger.info("code predictor CUDA graph captured for batch size %d", loop.hidden.shape[0])
            return graph
        except Exception as exc:  # the eager static path stays correct, only slower
            self._graph_failed = True
            logger.warning("code predictor graph capture failed (%s: %s); running eagerly", type(exc).__name__, exc)
            return None


@dataclass
class TalkerState:
    """What the talker keeps for one request between steps."""

    caches: list[KVCache]
    frame_idx: torch.Tensor
    target: torch.Tensor
    last_codes: torch.Tensor | None = None


class {{ cookiecutter.camel }}TalkerForConditionalGeneration(nn.Module):
    """Stage 0 (AR): one frame of K codes per step per request, emitted under ``codes.audio``."""

    have_multimodal_outputs = True
    has_preprocess = True
    has_postprocess = False

    def __init__(
        self,
        *,
        vllm_config: Any = None,
        prefix: str = "",
        config: {{ cookiecutter.camel }}Config | None = None,
    ) -> None:
        super().__init__()
        self.config = config if config is not None else vllm_config.model_config.hf_config
        self.model = {{ cookiecutter.camel }}TalkerModel(self.config)
        self.code_predictor = {{ cookiecutter.camel }}CodePredictor(self.config)
        init_weights_from_seed(self, self.config.seed)
        offsets = self.config.audio_token_offset + self.config.codebook_size * torch.arange(self.config.num_code_groups)
        self.register_buffer("code_offsets", offsets, persistent=False)
        self._states: dict[str, TalkerState] = {}
        self._pending: list[tuple[str, torch.Tensor, int]] = []
        self._step_tokens: torch.Tensor | None = None

    def embed_input_ids(self, input_ids: torch.Tensor, **_: Any) -> torch.Tensor:
        return self.model.embed_tokens(input_ids)

    def frame_embedding(self, codes: torch.Tensor) -> torch.Tensor:
        """Next-step input of a frame: the sum of its K offset-mapped code token embeddings, ``[hidden]``."""
        return self.model.embed_tokens(self.code_offsets + codes.clamp(min=0)).sum(dim=0)

    def new_state(self, prompt_len: int, device: torch.device) -> TalkerState:
        return TalkerState(
            caches=[KVCache() for _ in range(self.config.num_hidden_layers)],
            frame_idx=torch.zeros(1, dtype=torch.long, device=device),
            target=torch.full((1,), self.config.frames_per_text_token * prompt_len, dtype=torch.long, device=device),
        )

    def preprocess(
        self, input_ids: torch.Tensor, input_embeds: torch.Tensor | None = None, **info: Any
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Input embeddings of one request: its prompt at prefill, the previous frame's codes afterwards."""
        key = request_key(info)
        span = input_ids.shape[0]
        state = self._states.get(key)
        if state is None or span > 1:
            state = self.new_state(span, input_ids.device)
            self._states[key] = state
            embeds = self.model.embed_tokens(input_ids)
        else:
            embeds = self.frame_embedding(state.last_codes)[None, :]
        self._pending.append((key, embeds, span))
        return input_ids, embeds, {}

    @torch.no_grad()
    def forward(
        self,
        input_ids: torch.Tensor | None,
        positions: torch.Tensor | None,
        intermediate_tensors: Any = None,
        inputs_embeds: torch.Tensor | None = None,
        runtime_additional_information: list[dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> OmniOutput:
        """One talker step over the requests that ``preprocess()`` saw, in batch order.

        Emits delta codes: ``multimodal_outputs["codes"]["audio"][i]`` is a ``[1, K]`` long tensor holding only the
        frame generated this step for request ``i`` (every column ``-1`` when that request produced its stop token);
        the stage input processor accumulates frames per request.
        """
        pending, self._pending = self._pending, []
        hidden_size = self.config.hidden_size
        device = self.model.embed_tokens.weight.device
        num_tokens = input_ids.shape[0] if input_ids is not None else sum(span for _, _, span in pending)
        if not pending:  # profiling / dummy run: no request went through preprocess()
            self._step_tokens = None
            rows = max(1, len(runtime_additional_information or []))
            empty = torch.zeros((0, self.config.num_code_groups), dtype=torch.long, device=device)
            hidden = torch.zeros(num_tokens, hidden_size, device=device)
            return OmniOutput(text_hidden_states=hidden, multimodal_outputs={"codes": {"audio": [empty] * rows}})
        if positions is None:
            raise ValueError("the talker needs the runner's positions")
        hidden_rows: list[torch.Tensor] = []
        last_hidden: list[torch.Tensor] = []
        offset = 0
        for key, embeds, span in pending:
            hidden = self.model(embeds, positions[offset : offset + span], self._states[key].caches)
            hidden_rows.append(hidden)
            last_hidden.append(hidden[-1:])
            offset += span
        states = [self._states[key] for key, _, _ in pending]
        codes, stop = self.code_predictor.predict(
            torch.cat(last_hidden),
            torch.cat([state.frame_idx for state in states]),
            torch.cat([state.target for state in states]),
            self.model.embed_tokens.weight,
        )
        frames: list[torch.Tensor] = []
        for i, state in enumerate(states):
            state.last_codes = codes[i]
            state.frame_idx = state.frame_idx + 1
            frames.append(codes[i : i + 1])
        code_token = self.config.audio_token_offset + codes[:, 0].clamp(min=0)
        self._step_tokens = torch.where(stop, self.config.stop_token_id, code_token)
        hidden_states = torch.cat(hidden_rows)
        if num_tokens > hidden_states.shape[0]:  # the runner padded the batch
            padding = hidden_states.new_zeros(num_tokens - hidden_states.shape[0], hidden_size)
            hidden_states = torch.cat([hidden_states, padding])
        return OmniOutput(text_hidden_states=hidden_states, multimodal_outputs={"codes": {"audio": frames}})

    def compute_logits(self, hidden_states: torch.Tensor | OmniOutput, sampling_metadata: Any = None) -> torch.Tensor:
        """Logits whose argmax is the stop (EOS) token for requests that produced it, else the frame's first code."""
        if isinstance(hidden_states, OmniOutput):
            hidden_states = hidden_states.text_hidden_states
        rows = hidden_states.shape[0]
        tokens = self._step_tokens
        if tokens is None or tokens.shape[0] != rows:  # dummy run: finish every row
            tokens = torch.full((rows,), self.config.stop_token_id, dtype=torch.long, device=hidden_states.device)
        logits = torch.full((rows, self.config.vocab_size), -1e9, dtype=torch.float32, device=hidden_states.device)
        return logits.scatter_(1, tokens[:, None], 0.0)

    def on_requests_finished(self, finished_req_ids: Iterable[str]) -> None:
        """Free the state of finished and aborted requests (the ids are the scheduler ids the runner injects)."""
        for req_id in finished_req_ids:
            self._states.pop(str(req_id), None)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        """The tiny default model draws its weights from ``config.seed``; drain the iterator and report all loaded."""
        for _ in weights:
            pass
        return {name for name, _ in self.named_parameters()}
