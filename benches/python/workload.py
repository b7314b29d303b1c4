"""The 6 MB Anthropic-shaped stream of the Rust bench crate (`workloads::anthropic_stream`),
reproduced byte for byte in Python (same xorshift64* generator, same seed), so the Python
benchmarks measure exactly the bytes the Rust benchmarks measure."""

from __future__ import annotations

MASK = (1 << 64) - 1

WORDS = [
    "the", "model", "streams", "tokens", "while", "tools", "run", "in", "parallel", "and",
    "results", "arrive", "order", "function", "returns", "value", "file", "read", "error",
    "context", "window", "会话", "工具", "结果", "模型", "日本語", "テキスト", "한국어", "🚀", "✅",
    "naïve", "café", "Straße", r'{\"json\": true}', r"\n", "fn main()", "let x = 42;",
]

TOOL_PIECES = [
    r'{\"path\": \"src/',
    "main",
    r'.rs\", \"off',
    r"set\": 1",
    r'0, \"limit\": 200}',
]


class Rng:
    """xorshift64*, as `ferroloop_bench::workloads::Rng`."""

    def __init__(self, seed: int) -> None:
        self.state = ((max(seed, 1) * 0x9E3779B97F4A7C15) & MASK) | 1

    def next_u64(self) -> int:
        s = self.state
        s ^= s >> 12
        s ^= (s << 25) & MASK
        s ^= s >> 27
        self.state = s
        return (s * 0x2545F4914F6CDD1D) & MASK

    def below(self, n: int) -> int:
        return self.next_u64() % max(n, 1)

    def pick(self, items: list[str]) -> str:
        return items[self.below(len(items))]


def anthropic_stream(seed: int = 42, target_bytes: int = 6_000_000) -> bytes:
    """An Anthropic Messages stream of about `target_bytes` bytes (text blocks of `text_delta`s
    with CJK and emoji, a `tool_use` block of `input_json_delta`s every fifth block, pings)."""
    rng = Rng(seed)
    out: list[bytes] = []
    size = 0

    def push(text: str) -> None:
        nonlocal size
        data = text.encode()
        out.append(data)
        size += len(data)

    push(
        'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_bench","type":"message",'
        '"role":"assistant","model":"claude-sonnet-4-20250514","content":[],"stop_reason":null,'
        '"stop_sequence":null,"usage":{"input_tokens":377,"cache_creation_input_tokens":0,'
        '"cache_read_input_tokens":0,"output_tokens":1}}}\n\n'
    )
    index = 0
    while size < target_bytes:
        if index % 5 == 4:
            push(
                f'event: content_block_start\ndata: {{"type":"content_block_start","index":{index},'
                f'"content_block":{{"type":"tool_use","id":"toolu_{index:08}","name":"read_file","input":{{}}}}}}\n\n'
            )
            for piece in TOOL_PIECES:
                push(
                    f'event: content_block_delta\ndata: {{"type":"content_block_delta","index":{index},'
                    f'"delta":{{"type":"input_json_delta","partial_json":"{piece}"}}}}\n\n'
                )
        else:
            push(
                f'event: content_block_start\ndata: {{"type":"content_block_start","index":{index},'
                f'"content_block":{{"type":"text","text":""}}}}\n\n'
            )
            for _ in range(50 + rng.below(400)):
                if rng.below(40) == 0:
                    push('event: ping\ndata: {"type": "ping"}\n\n')
                fragment = []
                for i in range(1 + rng.below(6)):
                    if i > 0 or rng.below(2) == 0:
                        fragment.append(" ")
                    fragment.append(rng.pick(WORDS))
                text = "".join(fragment)
                push(
                    f'event: content_block_delta\ndata: {{"type":"content_block_delta","index":{index},'
                    f'"delta":{{"type":"text_delta","text":"{text}"}}}}\n\n'
                )
        push(f'event: content_block_stop\ndata: {{"type":"content_block_stop","index":{index}}}\n\n')
        index += 1
    push(
        'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn",'
        '"stop_sequence":null},"usage":{"output_tokens":120000}}\n\n'
    )
    push('event: message_stop\ndata: {"type":"message_stop"}\n\n')
    return b"".join(out)


if __name__ == "__main__":
    import hashlib
    import sys

    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 42
    target = int(sys.argv[2]) if len(sys.argv) > 2 else 6_000_000
    data = anthropic_stream(seed, target)
    print(len(data), hashlib.sha256(data).hexdigest())
