"""A loadable model directory for a scaffolded tiny model: what vLLM's loader and tokenizer need.

Runs inside the engine environment (``python -m omnitts.validators.engine.modeldir --tree T --model NAME --out
DIR``), with the tree first on ``sys.path``. Writes ``config.json`` (the model's config class's
``save_pretrained``, with the pipeline's architecture), a tokenizer (``tokenizer.json`` +
``tokenizer_config.json``) and ``model.safetensors`` (the seeded weights of the model as built on the CPU).

The tokenizer is a WordLevel tokenizer over bytes that reproduces the config's ``encode_text`` where the config
has one (the scaffold's tiny models do: byte tokens folded into the text vocabulary, then the audio start
token), so the engine's prompt tokens are exactly the harness tier's.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
from pathlib import Path

TOKENIZER_SAMPLE = "The quick brown fox: 0123456789, déjà vu!"


def _pipeline(tree: Path, model: str) -> dict[str, str]:
    """model_type and architecture of the model's PipelineConfig (read from its pipeline.py)."""
    source = (tree / "vllm_omni" / "model_executor" / "models" / model / "pipeline.py").read_text()
    found = {key: re.search(rf'{key}="([^"]+)"', source) for key in ("model_type", "model_arch")}
    return {key: match.group(1) for key, match in found.items() if match}


def _config_class(model: str):
    module = importlib.import_module(f"vllm_omni.model_executor.models.{model}")
    classes = [getattr(module, n) for n in getattr(module, "__all__", dir(module)) if n.endswith("Config")]
    if not classes:
        raise SystemExit(f"modeldir: vllm_omni.model_executor.models.{model} exports no *Config class")
    return classes[0], module


def _byte_tokenizer(config):
    """A WordLevel tokenizer with ``encode_text``'s ids: bytes (ByteLevel normalizer), each byte replaced by the
    first byte of its id class (``num_special + b % span``, so the vocabulary has one entry per id, as WordLevel
    needs to survive serialisation), one token per byte, then the audio start token."""
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, processors

    special, span = config.num_special_tokens, config.text_vocab_size - config.num_special_tokens
    char_of = _bytes_to_unicode()
    representative: dict[int, str] = {}
    replaces = []
    for b in range(256):
        token_id = special + b % span
        if token_id not in representative:
            representative[token_id] = char_of[b]
        elif char_of[b] != representative[token_id]:
            replaces.append(normalizers.Replace(char_of[b], representative[token_id]))
    vocab = {ch: token_id for token_id, ch in representative.items()}
    start = "<audio_start>"
    vocab[start] = config.audio_start_token_id
    # The other special ids get names too, so the saved vocabulary has no holes.
    reserved = [f"<special_{i}>" for i in range(special) if i not in vocab.values()]
    vocab.update({name: int(name[9:-1]) for name in reserved})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=start))
    tok.normalizer = normalizers.Sequence([normalizers.ByteLevel(), *replaces])
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.post_processor = processors.TemplateProcessing(
        single=f"$A {start}", special_tokens=[(start, config.audio_start_token_id)]
    )
    tok.add_special_tokens([start, *reserved])
    return tok


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-to-character table, which tokenizers' ByteLevel uses."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs, strict=True)}


def build(tree: Path, model: str, out: Path) -> dict:
    import torch
    from safetensors.torch import save_file
    from transformers import PreTrainedTokenizerFast

    sys.path.insert(0, str(tree))
    meta = _pipeline(tree, model)
    config_cls, package = _config_class(model)
    config = config_cls()
    if "model_arch" in meta:
        config.architectures = [meta["model_arch"]]
    out.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(out)
    if not hasattr(config, "encode_text"):
        raise SystemExit(f"modeldir: {config_cls.__name__} has no encode_text(); pass --checkpoint with a tokenizer")
    tok = _byte_tokenizer(config)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=None, pad_token=None)
    fast.save_pretrained(out)
    got = fast(TOKENIZER_SAMPLE)["input_ids"]
    want = config.encode_text(TOKENIZER_SAMPLE)
    if got != want:
        raise SystemExit(f"modeldir: tokenizer disagrees with encode_text on {TOKENIZER_SAMPLE!r}: {got} != {want}")
    # The seeded weights as the model builds them on the CPU (every module class the package exports).
    tensors = {}
    for name in getattr(package, "__all__", []):
        cls = getattr(package, name)
        if isinstance(cls, type) and issubclass(cls, torch.nn.Module):
            with torch.device("cpu"):
                module = cls(config=config)
            tensors.update({f"{name}.{k}": v.detach().contiguous().clone() for k, v in module.state_dict().items()})
    save_file(tensors or {"placeholder": torch.zeros(1)}, str(out / "model.safetensors"))
    info = {
        "dir": str(out),
        "model_type": meta.get("model_type"),
        "arch": meta.get("model_arch"),
        "tensors": len(tensors),
        "tokenizer_sample_ids": got,
    }
    (out / "omnitts_modeldir.json").write_text(json.dumps(info, indent=1))
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="omnitts-engine-modeldir")
    parser.add_argument("--tree", required=True, type=Path)
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    print(json.dumps(build(args.tree.resolve(), args.model, args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
