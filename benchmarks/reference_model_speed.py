"""Seconds per utterance of each reference model: HF-style reference vs the served (stepped) path, same run.

Usage: python benchmarks/reference_model_speed.py [--device cpu|cuda] [--repeat 3]
Target (issue 3): well under a second per utterance on CPU. Timing bounds live here, not in unit tests.
"""

from __future__ import annotations

import argparse
import time

from omnitts.reference_models.catalog import get_subject

MODELS = ("ref_two_stage", "ref_single_stage", "ref_native_ar")
TEXT = "The quick brown fox jumps over the lazy dog."


def best_of(repeat: int, fn) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for model in MODELS:
        subject = get_subject(model)
        reference = subject.reference(args.device)
        stages = subject.build(args.device)
        ref = best_of(args.repeat, lambda reference=reference: reference.generate(TEXT))
        served = best_of(args.repeat, lambda s=subject, st=stages: s.run([TEXT], args.device, stages=st))
        verdict = "meets" if max(ref, served) < 1.0 else "MISSES"
        print(f"{model:<18} reference {ref:.3f} s  served {served:.3f} s  ratio {served / ref:.2f}  {verdict} < 1 s")


if __name__ == "__main__":
    main()
