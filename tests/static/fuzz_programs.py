"""A seeded generator of random Python programs shaped like model code (nn.Module classes, hooks,
loops, branches, comprehensions, closures, generators, match, try, async), and of the byte-level
variants a file can arrive in (line endings, BOM, coding cookie, form feeds, truncation, junk bytes).

Deterministic for a seed; no third-party fuzzer needed, so it runs in CI as an ordinary test."""

from __future__ import annotations

import random

HOOKS = ("forward", "make_omni_output", "preprocess", "postprocess", "compute_logits", "helper", "_step", "sample")
NAMES = ("x", "y", "out", "h", "codes", "infos", "info", "lengths", "buf", "state", "req_id", "i", "j", "t")
ATTRS = ("proj", "cache", "decoder", "_buf", "states", "codec", "talker", "_done", "head")
CALLS = (
    "torch.zeros({a})",
    "torch.cat([{a}, {b}])",
    "{a}.item()",
    "{a}.cpu()",
    "{a}.tolist()",
    "{a}.to('cpu')",
    "int({a})",
    "float({a}.sum())",
    "len({a})",
    "self.{attr}({a})",
    "self.{attr}.get({a})",
    "np.asarray({a})",
    "{a}[{b}]",
    "{a}.shape[0]",
    "torch.stack([{a} for _ in range(3)])",
    "{a} if {b} else {a}",
    "(lambda q: q + 1)({a})",
    "f'{{{name}}}'",
    "{a} @ {b}",
    "-{a}",
    "not {a}",
    "{a} and {b}",
    "[v for v in {a} if v]",
    "{{k: v for k, v in {a}.items()}}",
)


class ProgramGenerator:
    """``program()`` returns the source text of one random module."""

    def __init__(self, seed: int, max_depth: int = 3) -> None:
        self.r = random.Random(seed)
        self.max_depth = max_depth

    # --- expressions ------------------------------------------------------------------------------
    def name(self) -> str:
        return self.r.choice(NAMES)

    def expr(self, depth: int = 0) -> str:
        r = self.r
        if depth > 1 or r.random() < 0.3:
            return r.choice([self.name(), f"({r.randint(0, 9)})", f"self.{r.choice(ATTRS)}", "None", "'cpu'"])
        text = r.choice(CALLS).format(
            a=self.expr(depth + 1), b=self.expr(depth + 1), attr=r.choice(ATTRS), name=self.name()
        )
        return f"({text})"  # composite operands keep their meaning whatever the precedence around them

    # --- statements -------------------------------------------------------------------------------
    def block(self, indent: int, depth: int, n: int | None = None) -> list[str]:
        n = n if n is not None else self.r.randint(1, 4)
        out: list[str] = []
        for _ in range(n):
            out += self.stmt(indent, depth)
        return out or [" " * indent + "pass"]

    def stmt(self, indent: int, depth: int) -> list[str]:
        r, pad = self.r, " " * indent
        simple = [
            lambda: [f"{pad}{self.name()} = {self.expr()}"],
            lambda: [f"{pad}self.{r.choice(ATTRS)} = {self.expr()}"],
            lambda: [f"{pad}{self.name()}.append({self.expr()})"],
            lambda: [f"{pad}{self.name()} += {self.expr()}"],
            lambda: [f"{pad}self.{r.choice(ATTRS)}[{self.name()}] = {self.expr()}"],
            lambda: [f"{pad}{self.name()}, {self.name()} = {self.expr()}, {self.expr()}"],
            lambda: [f"{pad}assert {self.expr()}, 'why'"],
            lambda: [f"{pad}del self.{r.choice(ATTRS)}[{self.name()}]"],
            lambda: [f"{pad}return {self.expr()}"],
            lambda: [f"{pad}yield {self.expr()}"],
            lambda: [f"{pad}raise ValueError({self.expr()})"],
            lambda: [f"{pad}{self.name()} = {self.expr()}  # omnitts: ignore[OMNI-I3-001] fuzz"],
            lambda: [f"{pad}print({self.expr()})  # omnitts: ignore[NOPE]"],
        ]
        if depth >= self.max_depth or r.random() < 0.55:
            return r.choice(simple)()
        d, inner = depth + 1, indent + 4
        compound = [
            lambda: (
                [f"{pad}for {self.name()} in {r.choice(['range(4)', self.expr(), 'infos', 'enumerate(infos)'])}:"]
                + self.block(inner, d)
            ),
            lambda: [f"{pad}while {self.expr()}:"] + self.block(inner, d) + [f"{inner * ' '}break"],
            lambda: [f"{pad}if {self.expr()}:"] + self.block(inner, d) + [f"{pad}else:"] + self.block(inner, d),
            lambda: [f"{pad}if self.{r.choice(ATTRS)} is None:"] + self.block(inner, d),
            lambda: [f"{pad}if ({self.name()} := {self.expr()}) is not None:"] + self.block(inner, d),
            lambda: [f"{pad}with torch.no_grad():"] + self.block(inner, d),
            lambda: (
                [f"{pad}try:"]
                + self.block(inner, d)
                + [f"{pad}except Exception as e:"]
                + self.block(inner, d)
                + [f"{pad}finally:"]
                + self.block(inner, d)
            ),
            lambda: (
                [f"{pad}match {self.expr()}:", f"{pad}    case 1:"]
                + self.block(inner + 4, d)
                + [f"{pad}    case _:"]
                + self.block(inner + 4, d)
            ),
            lambda: [f"{pad}def {r.choice(HOOKS)}({self.name()}):"] + self.block(inner, d),
        ]
        return r.choice(compound)()

    def function(self, indent: int, method: bool) -> list[str]:
        r, pad = self.r, " " * indent
        args = ["self"] if method else []
        args += r.sample(["x", "infos", "lengths", "*args", "**kwargs", "t: torch.Tensor"], r.randint(0, 3))
        args = sorted(args, key=lambda a: (a.startswith("**"), a.startswith("*")))  # *args, then **kwargs
        deco = [f"{pad}@torch.inference_mode()"] if r.random() < 0.2 else []
        kw = "async def" if r.random() < 0.03 else "def"
        head = f"{pad}{kw} {r.choice(HOOKS)}({', '.join(dict.fromkeys(args))}):"
        doc = [f'{pad}    """Returns the delta of this step."""'] if r.random() < 0.5 else []
        return deco + [head] + doc + self.block(indent + 4, 1, r.randint(1, 6))

    def program(self) -> str:
        r = self.r
        out = ["import torch", "import numpy as np", ""]
        for _ in range(r.randint(1, 3)):
            if r.random() < 0.7:
                out += [f"class M{r.randint(0, 99)}(torch.nn.Module):"]
                for _ in range(r.randint(1, 4)):
                    out += self.function(4, True) + [""]
            else:
                out += self.function(0, False) + [""]
        return "\n".join(out) + "\n"


PLANTED = """import torch


class Planted(torch.nn.Module):
    def forward(self, x: torch.Tensor):
        \"\"\"Returns the delta of this step.\"\"\"
        out = []
        for i in range(4):
            out.append(x[i].item())
        return out
"""


def variants(text: str, r: random.Random) -> dict[str, tuple[bytes, bytes]]:
    """name -> (reference, variant): the variant is the bytes a file could hold for the same module as
    the reference (other line endings, a BOM, another encoding, form feeds, odd line separators in
    comments); Python reads both as the same code, so both must lint alike, line numbers included."""
    lines = text.split("\n")
    commented = "\n".join(line + "  # @@ ok" if line.strip() else line for line in lines)
    return {
        "crlf": (text.encode(), text.replace("\n", "\r\n").encode()),
        "cr": (text.encode(), text.replace("\n", "\r").encode()),
        "mixed": (text.encode(), _mixed_endings(lines[:-1], r).encode()),
        "bom": (text.encode(), b"\xef\xbb\xbf" + text.encode()),
        "latin-1": (("#\n" + text).encode(), ("# -*- coding: latin-1 -*- caf\u00e9\n" + text).encode("latin-1")),
        "formfeed": (text.encode(), "\n".join("\f" if not line.strip() else line for line in lines).encode()),
        "separators-in-comments": (
            commented.replace("@@", "___").encode(),
            commented.replace("@@", "\u2028\u2029\x85\x0b\x1c").encode(),
        ),
    }


def _mixed_endings(lines: list[str], r: random.Random) -> str:
    out, prev = [], ""
    for line in lines:
        # "\r" then an empty line ending in "\n" would read as one "\r\n": a different module.
        ending = r.choice(["\n", "\r\n", "\r"] if line or prev != "\r" else ["\r\n", "\r"])
        out.append(line + ending)
        prev = ending
    return "".join(out)


def damaged(text: str, r: random.Random) -> list[bytes]:
    """Broken files: truncated, junk bytes, a null byte, bad UTF-8, a mismatched tab."""
    raw = text.encode()
    cut = r.randint(0, max(1, len(raw) - 1))
    return [
        raw[:cut],
        raw[:cut] + bytes(r.randint(0, 255) for _ in range(8)) + raw[cut:],
        raw[:cut] + b"\x00" + raw[cut:],
        raw[:cut] + b"\xff\xfe" + raw[cut:],
        raw.replace(b"    ", b"\t", 1),
        b"# -*- coding: no-such-codec -*-\n" + raw,
    ]
