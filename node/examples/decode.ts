// Decode a recorded Anthropic stream with types (checked by `tsc --noEmit`).
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { StreamDecoder, StreamTruncatedError, type DecodeEvent, type DecodeErrorDetail } from 'ferroloop'

// Narrowing on `type` gives each event its own fields' types: every member, each field at its
// own type; `never` at the end proves the switch covers the union.
function describe(e: DecodeEvent): string {
  switch (e.type) {
    case 'message_start': {
      const message: Record<string, unknown> = e.message
      return `message ${String(message.id)}`
    }
    case 'block_start': {
      const index: number = e.index
      const block: Record<string, unknown> = e.block
      return `block ${index}: ${String(block.type)}`
    }
    case 'text_delta': {
      const text: string = e.text
      return `text ${e.index}: ${text.length} chars`
    }
    case 'refusal_delta': {
      const refusal: string = e.refusal
      return `refusal ${e.index}: ${refusal}`
    }
    case 'thinking_delta': {
      const thinking: string = e.thinking
      return `thinking ${e.index}: ${thinking.length} chars`
    }
    case 'signature_delta': {
      const signature: string = e.signature
      return `signature ${e.index}: ${signature.length} chars`
    }
    case 'citations_delta': {
      const citation: Record<string, unknown> = e.citation
      return `citation ${e.index}: ${JSON.stringify(citation)}`
    }
    case 'input_json_delta': {
      const partialJson: string = e.partial_json
      return `input ${e.index}: ${partialJson}`
    }
    case 'unknown_delta': {
      const delta: Record<string, unknown> = e.delta
      return `delta ${e.index}: ${String(delta.type)}`
    }
    case 'block_stop': {
      const index: number = e.index
      return `block ${index} done`
    }
    case 'tool_use_ready': {
      const [id, name]: [string, string] = [e.id, e.name]
      const input: unknown = e.input
      return `run ${name} (${id}) with ${JSON.stringify(input)}`
    }
    case 'tool_use_invalid': {
      const [id, name, partialJson, error]: string[] = [e.id, e.name, e.partial_json, e.error]
      return `bad input for ${name} (${id}): ${error} in ${partialJson}`
    }
    case 'tool_use_truncated': {
      const [id, name, partialJson]: string[] = [e.id, e.name, e.partial_json]
      return `${name} (${id}) cut at ${partialJson.length} chars`
    }
    case 'message_delta': {
      const delta: Record<string, unknown> = e.delta
      const usage: Record<string, unknown> | null = e.usage
      return `stop: ${String(delta.stop_reason)}, usage: ${usage === null ? 'none' : JSON.stringify(usage)}`
    }
    case 'message_stop':
    case 'ping':
      return e.type
    case 'unknown': {
      const eventType: string = e.event_type
      const data: unknown = e.data
      return `unknown event ${eventType}: ${JSON.stringify(data)}`
    }
    default: {
      const unreachable: never = e
      return unreachable
    }
  }
}

const decoder = new StreamDecoder({ provider: 'anthropic' })
// Relative to this file, not to the working directory (it worked from node/ only). `__dirname`:
// this package has no `"type": "module"`, so tsc (NodeNext) treats the file as CommonJS, where
// `import.meta` is an error.
const bytes = readFileSync(join(__dirname, '../../tests/fixtures/anthropic/tool_use_response.sse'))
for (let i = 0; i < bytes.length; i += 1460) {
  for (const event of decoder.feed(bytes.subarray(i, i + 1460))) {
    const e: DecodeEvent = event
    console.log(describe(e))
  }
}
try {
  console.log(decoder.finish())
} catch (err) {
  if (err instanceof StreamTruncatedError) console.log((err as StreamTruncatedError & DecodeErrorDetail).partial)
}
