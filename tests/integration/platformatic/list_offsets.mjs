// @platformatic/kafka 2.12 against sluice: ListOffsets (v9, the client's
// highest) by every mode its Admin lets through, before and after
// DeleteRecords moved the log start. issue17_apis.mjs covers MAX_TIMESTAMP
// (-3) on out-of-order timestamps; this one covers the others:
//   EARLIEST (-2)       the log start offset
//   LATEST (-1)         the high watermark (also at READ_COMMITTED: no
//                       transactions, so the last stable offset is the same)
//   a timestamp         the first offset at or after it, with its timestamp;
//                       none below the log start; offset -1 past the last one
//   EARLIEST_LOCAL (-4) the log start too: sluice keeps no tiered storage
//   LATEST_TIERED (-5)  offset -1, timestamp -1, as Kafka answers without
//                       tiered storage
// and each answer's leader epoch (the partition's, -1 with offset -1).
//
// Usage: node list_offsets.mjs HOST:PORT TOPIC; prints "ok" on success.
import assert from 'node:assert/strict'
import { Admin, FetchIsolationLevels, Producer } from '@platformatic/kafka'

const [bootstrap, topic] = process.argv.slice(2)

const t0 = BigInt(Date.now() - 600_000)
const ts = i => t0 + 10n * BigInt(i) // offset i has timestamp t0 + 10 i
const COUNT = 8

const producer = new Producer({ clientId: 'sluice-it', bootstrapBrokers: [bootstrap], idempotent: true, autocreateTopics: true })
const admin = new Admin({ clientId: 'sluice-it', bootstrapBrokers: [bootstrap] })

async function list (timestamp, isolationLevel) {
  const [t] = await admin.listOffsets({ topics: [{ name: topic, partitions: [{ partitionIndex: 0, timestamp }] }], isolationLevel })
  assert.equal(t.name, topic)
  const { offset, timestamp: at, leaderEpoch } = t.partitions[0]
  return { offset, timestamp: at, leaderEpoch }
}

try {
  // Two batches: offsets 0-4, then 5-7.
  for (const [from, to] of [[0, 5], [5, COUNT]]) {
    const messages = []
    for (let i = from; i < to; i++) messages.push({ topic, partition: 0, value: Buffer.from(`v${i}`), timestamp: ts(i) })
    await producer.send({ messages })
  }
  const md = await admin.metadata({ topics: [topic] })
  const epoch = md.topics.get(topic).partitions[0].leaderEpoch
  assert.ok(epoch >= 0, `leader epoch ${epoch}`)
  const at = (offset, timestamp) => ({ offset, timestamp, leaderEpoch: offset < 0n ? -1 : epoch })

  const checks = logStart => [
    ['EARLIEST', -2n, at(logStart, -1n)],
    ['LATEST', -1n, at(BigInt(COUNT), -1n)],
    ['EARLIEST_LOCAL', -4n, at(logStart, -1n)],
    ['LATEST_TIERED', -5n, at(-1n, -1n)],
    ['an exact timestamp', ts(6), at(6n, ts(6))],
    ['between two timestamps', ts(3) + 5n, at(4n, ts(4))],
    ['the second batch\'s first timestamp', ts(5), at(5n, ts(5))],
    ['the last timestamp', ts(COUNT - 1), at(BigInt(COUNT - 1), ts(COUNT - 1))],
    ['past the last timestamp', ts(COUNT - 1) + 1n, at(-1n, -1n)],
    // Nothing below the log start, although its batch may still be on disk.
    ['the first timestamp', ts(0), at(logStart, ts(Number(logStart)))]
  ]
  for (const logStart of [0n, 2n]) {
    if (logStart > 0n) {
      const [deleted] = await admin.deleteRecords({ topics: [{ name: topic, partitions: [{ partition: 0, offset: logStart }] }] })
      assert.equal(deleted.partitions[0].lowWatermark, logStart)
    }
    assert.deepEqual(await list(-1n, FetchIsolationLevels.READ_COMMITTED), at(BigInt(COUNT), -1n), 'LATEST, read committed')
    for (const [what, timestamp, want] of checks(logStart)) {
      assert.deepEqual(await list(timestamp), want, `${what} (${timestamp}) with the log starting at ${logStart}`)
    }
  }
  console.log('ok')
} finally {
  await admin.close().catch(() => {})
  await producer.close().catch(() => {})
}
