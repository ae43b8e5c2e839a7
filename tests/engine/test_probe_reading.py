"""What the probe reads, unit by unit: the SSE reader against the HTML standard's examples and any split of the
stream into reads, the container of each response format (VALID: what soundfile writes for vLLM-Omni's speech route;
INVALID: another format's bytes), and the shape checks of ``/v1/models`` and ``/openapi.json``."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile as sf

from omnitts.validators.backends import decode, discovery, sse
from omnitts.validators.backends.url import audio_bound

# ------------------------------------------------------------------------------------------------ SSE


def parsed(body: bytes, sizes=None) -> tuple[list[tuple[str, str]], bool]:
    """Events (type, data) and whether the body stopped inside an event, the body fed in reads of ``sizes``."""
    reads, at = [], 0
    for size in sizes or [len(body)]:
        reads.append((0.0, body[at : at + size]))
        at += size
    reads.append((0.0, body[at:]))
    stream = sse.parse(reads)
    return [(kind, data) for _, kind, data in stream.events], stream.unfinished


SPEC_CASES = {
    # the HTML standard's examples (9.2.6), and one per rule
    "two data lines": (b"data: YHOO\ndata: +2\ndata: 10\n\n", [("", "YHOO\n+2\n10")]),
    "comment, then id": (
        b": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\n",
        [
            ("", "first event"),
            ("", "second event"),
        ],
    ),
    "one leading space dropped, no more": (
        b"data:test\n\ndata: test\n\ndata:  test\n\n",
        [
            ("", "test"),
            ("", "test"),
            ("", " test"),
        ],
    ),
    "empty data lines": (b"data\n\ndata\ndata\n\n", [("", ""), ("", "\n")]),
    "CRLF, LF and CR": (
        b"event: a\r\ndata: 1\r\n\r\nevent: b\ndata: 2\n\nevent: c\rdata: 3\r\r",
        [
            ("a", "1"),
            ("b", "2"),
            ("c", "3"),
        ],
    ),
    "mixed line ends": (b"data: 1\r\n\ndata: 2\n\r\ndata: 3\r\r\n", [("", "1"), ("", "2"), ("", "3")]),
    "an event field without data dispatches nothing": (b"event: speech.audio.done\n\ndata: x\n\n", [("", "x")]),
    "the event type does not leak": (b"event: a\ndata: 1\n\ndata: 2\n\n", [("a", "1"), ("", "2")]),
    "a byte order mark opens the stream only": (b"\xef\xbb\xbfdata: 1\n\n", [("", "1")]),
    "blank lines in a row": (b"\n\n\n\ndata: 1\n\n\n\n\ndata: 2\n\n", [("", "1"), ("", "2")]),
}


@pytest.mark.parametrize(("body", "want"), SPEC_CASES.values(), ids=SPEC_CASES.keys())
def test_sse_reads_events_as_the_standard_says(body, want):
    assert parsed(body) == (want, False)


@pytest.mark.parametrize(("body", "want"), SPEC_CASES.values(), ids=SPEC_CASES.keys())
def test_sse_events_do_not_depend_on_how_the_body_is_split_into_reads(body, want):
    for cut in range(len(body) + 1):  # every place one read can end, CRLF split included
        assert parsed(body, [cut]) == (want, False), cut
    assert parsed(body, [1] * len(body)) == (want, False)  # a byte a read


def test_sse_an_event_without_its_blank_line_is_not_an_event():
    assert parsed(b"data: 1\n\ndata: 2\n") == ([("", "1")], True)
    assert parsed(b"data: 1\n\ndata: 2") == ([("", "1")], True)
    assert parsed(b"data: " + b"A" * 100_000, [65536]) == ([], True)


def test_sse_events_are_typed_by_their_field_or_their_json():
    body = b'event: speech.audio.delta\ndata: {"audio": "AAA="}\n\ndata:{"type":"speech.audio.done"}\n\ndata: [1]\n\n'
    found = sse.events([(0.5, body)])
    assert [(at, kind) for at, kind, _ in found] == [(0.5, "speech.audio.delta"), (0.5, "speech.audio.done"), (0.5, "")]
    assert found[2][2] == {"raw": "[1]"}  # data that is not a JSON object is kept as text
    assert sse.audio(found) == [(0.5, b"\x00\x00")]


# ------------------------------------------------------------------------------------------------ containers


def written(fmt: str) -> bytes:
    """A second of a tone as vLLM-Omni 0.30.0's speech route writes it (soundfile format and subtype per format)."""
    samples = (0.3 * np.sin(np.arange(16000) / 8)).astype(np.float32)
    if fmt == "pcm":
        return (samples * 32767).astype("<i2").tobytes()
    kind = {"wav": ("WAV", None), "flac": ("FLAC", None), "mp3": ("MP3", None), "opus": ("OGG", "OPUS")}[fmt]
    buf = io.BytesIO()
    sf.write(buf, samples, 16000, format=kind[0], subtype=kind[1])
    return buf.getvalue()


FORMATS = ("wav", "flac", "mp3", "opus", "pcm")
ADTS = bytes([0xFF, 0xF1, 0x50, 0x80, 0x02, 0x1F, 0xFC]) + b"\x00" * 16  # an AAC frame header (MPEG-4, LC, 16 kHz)


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_format_is_valid_in_its_own_container(fmt):
    assert decode.container_problem(fmt, written(fmt)) is None
    if fmt != "pcm":
        assert decode.sniff(written(fmt)) == fmt


@pytest.mark.parametrize(("fmt", "other"), [(f, o) for f in FORMATS for o in ("wav", "flac", "opus") if f != o])
def test_each_format_is_invalid_in_another_container(fmt, other):
    problem = decode.container_problem(fmt, written(other))
    assert problem and f"{fmt} answered with a {other} container" in problem


def test_aac_mp3_and_ogg_vorbis_are_told_apart():
    assert decode.sniff(ADTS) == "aac" and decode.container_problem("aac", ADTS) is None
    assert decode.container_problem("mp3", ADTS).startswith("mp3 answered with a aac container")
    assert decode.container_problem("aac", written("mp3")).startswith("aac answered with a mp3 container")
    vorbis = io.BytesIO()
    sf.write(vorbis, np.zeros(16000, np.float32), 16000, format="OGG", subtype="VORBIS")
    assert decode.container_problem("opus", vorbis.getvalue()).startswith("opus answered with a ogg container")
    id3 = b"ID3\x04\x00\x00\x00\x00\x00\x0a" + b"\x00" * 10 + written("flac")  # a 10-byte ID3v2 tag, then FLAC
    assert decode.sniff(id3) == "flac"


def test_pcm_is_whole_samples_without_a_header():
    assert "not whole 16-bit samples" in decode.container_problem("pcm", b"\x00\x01\x02")
    assert decode.container_problem("pcm", b"") is None
    assert decode.container_problem("pcm", b"\xff\xfb" + b"\x00" * 100) is None  # samples may look like an MP3 sync


def test_nothing_is_a_format_the_route_does_not_write():
    assert decode.container_problem("xyz", b"anything") is None


# ------------------------------------------------------------------------------------------------ discovery


def test_served_models_reads_openai_model_lists():
    assert discovery.served_models({"object": "list", "data": [{"id": "a"}, {"id": "b", "x": 1}]}) == ["a", "b"]
    assert discovery.served_models({"data": []}) == []
    for bad in (None, [], {"data": None}, {"data": {}}, {"data": ["a"]}, {"data": [{"id": 3}]}, {"data": [{}]}):
        with pytest.raises(discovery.Malformed):
            discovery.served_models(bad)


def test_speech_schema_reads_vllm_omni_shapes():
    props = {
        "input": {"type": "string"},
        "response_format": {"anyOf": [{"type": "string", "enum": ["wav", "pcm"]}, {"type": "null"}]},
        "stream": {"type": "boolean"},
        "stream_format": {"oneOf": [{"enum": ["sse", "audio"]}]},
    }
    doc = {
        "paths": {"/v1/audio/speech": {}},
        "components": {"schemas": {"OpenAICreateSpeechRequest": {"properties": props}}},
    }
    offer = discovery.speech_schema(doc)
    assert offer.name == "OpenAICreateSpeechRequest" and offer.fields == tuple(sorted(props))
    assert offer.formats == ("wav", "pcm") and offer.stream_formats == ("sse", "audio")
    assert offer.paths == ("/v1/audio/speech",)
    del props["stream_format"]
    assert discovery.speech_schema(doc).stream_formats == ("sse",)
    del props["stream"]
    assert discovery.speech_schema(doc).stream_formats == ()
    bare = discovery.speech_schema({})  # a document that says nothing: nothing offered, no paths listed
    assert (bare.name, bare.fields, bare.formats, bare.stream_formats, bare.paths) == (None, (), (), None, None)


@pytest.mark.parametrize(
    "doc",
    [
        [],
        {"paths": []},
        {"components": "x"},
        {"components": {"schemas": [1]}},
        {"components": {"schemas": {"A": 1}}},
        {"components": {"schemas": {"A": {"properties": []}}}},
        {"components": {"schemas": {"SpeechRequest": {"properties": {"input": "string"}}}}},
        {
            "components": {
                "schemas": {"SpeechRequest": {"properties": {"input": {}, "response_format": {"enum": "wav"}}}}
            }
        },
        {"components": {"schemas": {"SpeechRequest": {"properties": {"input": {}, "stream_format": {"anyOf": {}}}}}}},
    ],
)
def test_speech_schema_refuses_malformed_documents(doc):
    with pytest.raises(discovery.Malformed):
        discovery.speech_schema(doc)


# ------------------------------------------------------------------------------------------------ the bound


def test_the_bound_grows_with_the_text_up_to_the_longest_and_says_why():
    short, longer, huge = audio_bound("Hi."), audio_bound("x" * 60), audio_bound("x" * 100_000)
    assert short.size == 10 * 48000 * 4 * 2  # never under 10 s of audio
    assert longer.size == 60 * 48000 * 4 * 2
    assert huge.size == audio_bound("x" * 200).size < 200 * 48000 * 4 * 2  # capped at the longest text asked
    assert audio_bound("x" * 60, 96000).size == 2 * longer.size  # a higher --sample-rate raises it
    assert "60 characters at 1 s each, x 48000 Hz x 4 bytes x 2 for SSE" in longer.why
