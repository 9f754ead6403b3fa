// Preloaded (node --import) by test_platformatic.py: on exit, writes to
// stderr each request kind the client sent, as "Name vN xCOUNT" lines, from
// its own tracing of every request. A failing test shows them, so one sees
// which versions the client chose against this broker.
import { tracingChannel } from 'node:diagnostics_channel'
import { protocolAPIsById } from '@platformatic/kafka'

const sent = new Map()
tracingChannel('plt:kafka:connections:api').subscribe({
  start ({ apiKey, apiVersion }) {
    const k = `${protocolAPIsById[apiKey] ?? apiKey} v${apiVersion}`
    sent.set(k, (sent.get(k) ?? 0) + 1)
  },
  end () {}, asyncStart () {}, asyncEnd () {}, error () {}
})
process.on('exit', () => {
  const lines = [...sent].sort().map(([k, n]) => `  ${k} x${n}`)
  process.stderr.write(`requests sent:\n${lines.join('\n')}\n`)
})
