#!/usr/bin/env python3
"""Writes conformance.json: SSE conformance vectors (input bytes -> expected items).

Inputs are written by hand below; expected items come from reference.py and every vector that
mirrors a web-platform-tests `eventsource/format-*` case also carries the WPT expectation, which
must agree (checked here). Run: python3 tests/sse/vectors.src.py
"""
import base64
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from reference import parse  # noqa: E402

B = lambda s: s.encode("utf-8")  # noqa: E731
M = lambda data, id="", event="message": {"event": event, "data": data, "id": id}  # noqa: E731

# name, input bytes, WPT expectation (or None)
CASES = [
    ("wpt-format-bom", B("\ufeffdata:1\n\n\ufeffdata:2\n\ndata:3\n\n"), [M("1"), M("3")]),
    ("wpt-format-bom-2", B("\ufeff\ufeffdata:1\n\ndata:2\n\ndata:3\n\n"), [M("2"), M("3")]),
    ("wpt-format-comments", B("data:1\r:\0\n:\r\ndata:2\n:" + "x" * 300 + "\rdata:3\n:data:fail\r:" + "y" * 300 + "\ndata:4\n\n"), [M("1\n2\n3\n4")]),
    ("wpt-format-data-before-final-empty-line", B("retry:1000\ndata:test1\n\nid:test\ndata:test2"), [{"retry": 1000}, M("test1")]),
    ("wpt-format-field-data", B("data:\n\ndata\ndata\n\ndata:test\n\n"), [M(""), M("\n"), M("test")]),
    ("wpt-format-field-event-empty", B("event: \ndata:data\n\n"), [M("data")]),
    ("wpt-format-field-event", B("event:test\ndata:x\n\ndata:x\n\n"), [M("x", event="test"), M("x")]),
    ("wpt-format-field-id", B("id: 1\ndata: data\n\n"), [M("data", id="1")]),
    ("wpt-format-field-id-2", B("id:1\ndata:x\n\nid:\ndata:x\n\ndata:x\n\n"), [M("x", "1"), M("x", ""), M("x", "")]),
    ("wpt-format-field-id-3", B("id:1\ndata:x\n\ndata:y\n\nid\ndata:z\n\n"), [M("x", "1"), M("y", "1"), M("z", "")]),
    ("wpt-format-field-id-null", B("id:1\0\ndata:x\n\nid:2\ndata:y\n\nid:3\0x\ndata:z\n\n"), [M("x"), M("y", "2"), M("z", "2")]),
    ("wpt-format-field-parsing", B("data:\0\ndata:  2\rData:1\ndata\0:2\ndata:1\r\0data:4\nda-ta:3\rdata_5\ndata:3\rdata:\r\n data:32\ndata:4\n\n"), [M("\0\n 2\n1\n3\n\n4")]),
    ("wpt-format-field-retry-bogus", B("retry:3000\nretry:1000x\ndata:x\n\n"), [{"retry": 3000}, M("x")]),
    ("wpt-format-field-retry-empty", B("retry\ndata:test\n\n"), [M("test")]),
    ("wpt-format-field-retry", B("retry:03000\ndata:x\n\n"), [{"retry": 3000}, M("x")]),
    ("wpt-format-field-unknown", B("data:test\n data\ndata\nfoobar:xxx\njustsometext\n:thisisacommentyay\ndata:test\n\n"), [M("test\n\ntest")]),
    ("wpt-format-leading-space", B("data:\ttest\rdata: \ndata:test\n\n"), [M("\ttest\n\ntest")]),
    ("wpt-format-newlines", B("data:test\r\ndata\ndata:test\r\n\r"), [M("test\n\ntest")]),
    ("wpt-format-null-character", B("data:\0\n\n\n\n"), [M("\0")]),
    ("wpt-format-utf-8", B("data:ok\u2026\n\n"), [M("ok\u2026")]),
    # Our own cases.
    ("empty-input", b"", []),
    ("only-bom", b"\xef\xbb\xbf", []),
    ("bom-then-event", b"\xef\xbb\xbfdata:a\n\n", [M("a")]),
    ("partial-bom-is-content", b"\xef\xbbdata:a\n\ndata:b\n\n", [M("b")]),
    ("bom-prefix-then-newline", b"\xef\n\ndata:b\n\n", [M("b")]),
    ("crlf-line-ends", B("event: e\r\ndata: one\r\ndata: two\r\n\r\n"), [M("one\ntwo", event="e")]),
    ("cr-line-ends", B("data: a\r\rdata: b\r\r"), [M("a"), M("b")]),
    ("mixed-line-ends", B("data: a\r\ndata: b\rdata: c\n\r\ndata: d\n\r"), [M("a\nb\nc"), M("d")]),
    ("cr-cr-lf", B("data: a\r\r\ndata: b\n\n"), [M("a"), M("b")]),
    ("lf-cr", B("data: a\n\rdata: b\n\n"), [M("a"), M("b")]),
    ("no-space-after-colon", B("data:x\n\n"), [M("x")]),
    ("two-spaces-keep-one", B("data:  x\n\n"), [M(" x")]),
    ("colon-in-value", B("data: a:b: c\n\n"), [M("a:b: c")]),
    ("field-without-colon-data", B("data\n\n"), [M("")]),
    ("event-without-data-not-dispatched", B("event: e\n\ndata: x\n\n"), [M("x")]),
    ("event-type-reset-after-dispatch", B("event: e\ndata: 1\n\ndata: 2\n\n"), [M("1", event="e"), M("2")]),
    ("id-persists", B("id: 7\ndata: a\n\ndata: b\n\n"), [M("a", "7"), M("b", "7")]),
    ("id-without-data-still-sets", B("id: 9\n\ndata: a\n\n"), [M("a", "9")]),
    ("id-empty-resets", B("id: 9\ndata: a\n\nid:\ndata: b\n\n"), [M("a", "9"), M("b", "")]),
    ("id-with-nul-ignored", B("id: 1\ndata: a\n\nid: 2\0\ndata: b\n\n"), [M("a", "1"), M("b", "1")]),
    ("retry-with-space", B("retry: 250\ndata: a\n\n"), [{"retry": 250}, M("a")]),
    ("retry-negative-ignored", B("retry: -1\ndata: a\n\n"), [M("a")]),
    ("retry-decimal-ignored", B("retry: 1.5\ndata: a\n\n"), [M("a")]),
    ("retry-two-spaces-ignored", B("retry:  5\ndata: a\n\n"), [M("a")]),
    ("retry-huge-saturates", B("retry: 99999999999999999999999\ndata: a\n\n"), [{"retry": 18446744073709551615}, M("a")]),
    ("retry-without-event", B("retry: 10\n\n"), [{"retry": 10}]),
    ("comment-only", B(": keep-alive\n\n"), []),
    ("unterminated-event-discarded", B("data: a\n\ndata: b\n"), [M("a")]),
    ("unterminated-line-discarded", B("data: a\n\ndata: b"), [M("a")]),
    ("utf8-multibyte", B("data: 世界 🌍 ü\n\n"), [M("世界 🌍 ü")]),
    ("invalid-utf8-replaced", b"data: a\xffb\n\n", [M("a\ufffdb")]),
    ("truncated-utf8-replaced", b"data: \xe4\xb8\n\n", [M("\ufffd")]),
    ("invalid-utf8-in-event-and-id", b"event: \xc3\nid: \xfe\ndata: x\n\n", [M("x", "\ufffd", "\ufffd")]),
    ("invalid-utf8-multiline", b"data: \xff\ndata: \xc0\xaf\n\n", [M("\ufffd\n\ufffd\ufffd")]),
    ("bom-mid-stream-not-stripped", B("data: a\n\n\ufeffdata: b\n\n"), [M("a")]),
    ("unknown-fields-ignored", B("foo: bar\ndata: a\nbaz\n\n"), [M("a")]),
    ("field-names-case-sensitive", B("DATA: a\nEvent: x\ndata: b\n\n"), [M("b")]),
    ("space-before-colon-is-name", B("data : a\ndata: b\n\n"), [M("b")]),
    ("many-blank-lines", B("\n\n\n\ndata: a\n\n\n\n"), [M("a")]),
    ("empty-event-value-default-type", B("event:\ndata: a\n\n"), [M("a")]),
    ("last-event-wins", B("event: a\nevent: b\ndata: x\n\n"), [M("x", event="b")]),
    ("anthropic-shape", B("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"), [M("{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}", event="content_block_delta")]),
    ("openai-done", B("data: {\"a\":1}\n\ndata: [DONE]\n\n"), [M("{\"a\":1}"), M("[DONE]")]),
]

vectors = []
for name, raw, wpt in CASES:
    got = parse(raw)
    if wpt is not None and got != wpt:
        sys.exit(f"{name}: reference {got!r} != expectation {wpt!r}")
    vector = {"name": name}
    try:
        vector["input"] = raw.decode("utf-8")
    except UnicodeDecodeError:
        vector["input_base64"] = base64.b64encode(raw).decode("ascii")
    vector["expected"] = got
    vectors.append(vector)

out = os.path.join(os.path.dirname(__file__), "conformance.json")
with open(out, "w", encoding="utf-8") as f:
    json.dump(vectors, f, ensure_ascii=False, indent=1)
    f.write("\n")
print(f"wrote {len(vectors)} vectors to {out}")
