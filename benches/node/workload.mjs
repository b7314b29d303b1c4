// The Anthropic-shaped benchmark stream, byte for byte the same as the Rust bench crate's
// `workloads::anthropic_stream(seed, target_bytes)` (same xorshift64* generator, same layout),
// so the Node and Rust figures measure identical input.

const MASK64 = (1n << 64n) - 1n

class Rng {
  constructor(seed) {
    const s = BigInt(Math.max(seed, 1))
    this.state = ((s * 0x9e3779b97f4a7c15n) & MASK64) | 1n
  }

  nextU64() {
    let x = this.state
    x ^= x >> 12n
    x ^= (x << 25n) & MASK64
    x ^= x >> 27n
    this.state = x
    return (x * 0x2545f4914f6cdd1dn) & MASK64
  }

  below(n) {
    return Number(this.nextU64() % BigInt(Math.max(n, 1)))
  }

  pick(items) {
    return items[this.below(items.length)]
  }
}

const WORDS = [
  'the', 'model', 'streams', 'tokens', 'while', 'tools', 'run', 'in', 'parallel', 'and',
  'results', 'arrive', 'order', 'function', 'returns', 'value', 'file', 'read', 'error',
  'context', 'window', '会话', '工具', '结果', '模型', '日本語', 'テキスト', '한국어', '🚀', '✅',
  'naïve', 'café', 'Straße', '{\\"json\\": true}', '\\n', 'fn main()', 'let x = 42;',
]

function textFragment(rng) {
  let out = ''
  const words = 1 + rng.below(6)
  for (let i = 0; i < words; i++) {
    if (i > 0 || rng.below(2) === 0) out += ' '
    out += rng.pick(WORDS)
  }
  return out
}

/** About `targetBytes` bytes of Anthropic Messages SSE (6 MB: ~50,000 events), as a Buffer. */
export function anthropicStream(seed, targetBytes) {
  const rng = new Rng(seed)
  const parts = []
  let length = 0
  const push = (s) => {
    parts.push(s)
    length += Buffer.byteLength(s)
  }
  push('event: message_start\ndata: {"type":"message_start","message":{"id":"msg_bench","type":"message","role":"assistant","model":"claude-sonnet-4-20250514","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":377,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}\n\n')
  let index = 0
  while (length < targetBytes) {
    if (index % 5 === 4) {
      const id = String(index).padStart(8, '0')
      push(`event: content_block_start\ndata: {"type":"content_block_start","index":${index},"content_block":{"type":"tool_use","id":"toolu_${id}","name":"read_file","input":{}}}\n\n`)
      const pieces = ['{\\"path\\": \\"src/', 'main', '.rs\\", \\"off', 'set\\": 1', '0, \\"limit\\": 200}']
      for (const piece of pieces) {
        push(`event: content_block_delta\ndata: {"type":"content_block_delta","index":${index},"delta":{"type":"input_json_delta","partial_json":"${piece}"}}\n\n`)
      }
    } else {
      push(`event: content_block_start\ndata: {"type":"content_block_start","index":${index},"content_block":{"type":"text","text":""}}\n\n`)
      const deltas = 50 + rng.below(400)
      for (let d = 0; d < deltas; d++) {
        if (rng.below(40) === 0) push('event: ping\ndata: {"type": "ping"}\n\n')
        const fragment = textFragment(rng)
        push(`event: content_block_delta\ndata: {"type":"content_block_delta","index":${index},"delta":{"type":"text_delta","text":"${fragment}"}}\n\n`)
      }
    }
    push(`event: content_block_stop\ndata: {"type":"content_block_stop","index":${index}}\n\n`)
    index += 1
  }
  push('event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":120000}}\n\n')
  push('event: message_stop\ndata: {"type":"message_stop"}\n\n')
  return Buffer.from(parts.join(''), 'utf8')
}

/** Splits `bytes` into `size`-byte views (no copies). */
export function chunked(bytes, size) {
  const out = []
  for (let i = 0; i < bytes.length; i += size) out.push(bytes.subarray(i, i + size))
  return out
}
