#!/usr/bin/env python3
"""A deliberately simple, independent WHATWG event-stream parser (whole input at once).

Used only to cross-check the expected outputs of the conformance vectors and fixture event lists
that the Rust, Python, Node and C suites compare against. Not fast; obviously correct.

Usage: reference.py FILE   -> prints the same JSON lines as `ferroloop sse FILE`.
"""
import json
import re
import sys


def parse(raw: bytes):
    text = raw.decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    # Lines end at CRLF, LF or CR; the last piece (no terminator) is an unterminated line.
    pieces = re.split(r"\r\n|\n|\r", text)
    lines = pieces[:-1]
    out = []
    data, event_type, last_id = None, "", ""
    for line in lines:
        if line == "":
            if data is not None:
                out.append({"event": event_type or "message", "data": data, "id": last_id})
            data, event_type = None, ""
            continue
        if line.startswith(":"):
            continue
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            data = value if data is None else data + "\n" + value
        elif name == "event":
            event_type = value
        elif name == "id":
            if "\0" not in value:
                last_id = value
        elif name == "retry":
            if value and all(c in "0123456789" for c in value):
                out.append({"retry": min(int(value), 2**64 - 1)})  # saturates like u64
    return out


if __name__ == "__main__":
    with open(sys.argv[1], "rb") as f:
        for item in parse(f.read()):
            print(json.dumps(item, ensure_ascii=False, separators=(",", ":")))
