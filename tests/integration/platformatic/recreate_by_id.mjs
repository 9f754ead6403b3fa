// @platformatic/kafka 2.12 against sluice: a topic deleted and created again
// under its name while a group consumer fetches it by id (Fetch v13+, topic
// ids from Metadata v10+; created and deleted with CreateTopics v7 and
// DeleteTopics v6 through the Admin client).
//
// What the client does: its consumer stream fetches with the topic id of its
// cached metadata. On UNKNOWN_TOPIC_ID it retries the same request (3 times,
// 1 s apart; the error is retriable but not "stale metadata", so the cache is
// not dropped) and then ends the stream with that error; it does not go on
// by itself. The consumer here keeps its metadata 60 s, so that every fetch
// after the delete names the old id, as one in flight across a delete does.
// An application then starts a consumer again, which reads the new id.
//
// Checks: the first consumer reads the old messages by id, then, once the
// topic is deleted and recreated, receives no message at all and its stream
// ends with UNKNOWN_TOPIC_ID (100); the recreated topic has a new id; the
// group's committed offsets of the old topic went with it (as Kafka drops a
// deleted partition's offsets), so a new member of the same group, starting
// from the committed offsets or else the earliest, reads every message of
// the new topic and none of the old.
//
// Usage: node recreate_by_id.mjs HOST:PORT TOPIC; prints "ok" on success.
import assert from 'node:assert/strict'
import { tracingChannel } from 'node:diagnostics_channel'
import { Admin, Consumer, Producer, stringDeserializers } from '@platformatic/kafka'

const [bootstrap, topic] = process.argv.slice(2)
const group = `${topic}-group`
const OLD = 5
const NEW = 3
const FETCH = 1

// The Fetch versions sent, from the client's own tracing of each request.
const fetchVersions = new Set()
tracingChannel('plt:kafka:connections:api').subscribe({
  start: ({ apiKey, apiVersion }) => { if (apiKey === FETCH) fetchVersions.add(apiVersion) },
  end () {}, asyncStart () {}, asyncEnd () {}, error () {}
})

// Deadlines are generous: a commit waits for an fdatasync of
// __consumer_offsets, and this VM's disk can stall for seconds (after
// other tests delete large files, for instance).
const deadline = (ms, what) => new Promise((_, reject) => setTimeout(() => reject(new Error(`timed out: ${what}`)), ms).unref())
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

async function produce (prefix, count) {
  // A producer per topic incarnation: its sequence numbers start again.
  const producer = new Producer({ clientId: 'sluice-it', bootstrapBrokers: [bootstrap], idempotent: true })
  try {
    await producer.send({
      messages: Array.from({ length: count }, (_, i) => ({ topic, partition: 0, key: Buffer.from(`${i}`), value: Buffer.from(`${prefix}-${i}`) }))
    })
  } finally {
    await producer.close()
  }
}

// The group's committed offset of the topic's partition 0; -1n if none.
async function committed (admin) {
  const [g] = await admin.listConsumerGroupOffsets({ groups: [group] })
  const p = g.topics.find(t => t.name === topic)?.partitions.find(p => p.partitionIndex === 0)
  return p?.committedOffset ?? -1n
}

const admin = new Admin({ clientId: 'sluice-it', bootstrapBrokers: [bootstrap] })
const consumers = []
const member = options => {
  const c = new Consumer({
    clientId: 'sluice-it', bootstrapBrokers: [bootstrap], groupId: group, autocommit: false,
    deserializers: stringDeserializers, sessionTimeout: 10_000, heartbeatInterval: 500, maxWaitTime: 500, ...options
  })
  consumers.push(c)
  return c
}
try {
  const [{ id: oldId }] = await admin.createTopics({ topics: [topic], partitions: 1, replicas: 1 })
  await produce('old', OLD)

  // The first consumer reads the old topic by id and commits.
  const first = member({ metadataMaxAge: 60_000 })
  const stream1 = await first.consume({ topics: [topic], mode: 'committed', fallbackMode: 'earliest' })
  const got1 = []
  const after = [] // messages after the delete: must stay empty
  let deleted = false
  const ended = new Promise(resolve => stream1.on('error', resolve))
  // 'data' handlers are not awaited one by one, and each commit may first
  // wait for metadata: chained, the commits reach the broker in message
  // order, so the last one committed is the newest (Kafka keeps the last
  // commit it receives, whatever its offset).
  let commits = Promise.resolve()
  stream1.on('data', m => {
    (deleted ? after : got1).push(m.value)
    if (!deleted) commits = commits.then(() => m.commit())
  })
  await Promise.race([(async () => { while (got1.length < OLD) await sleep(50) })(), deadline(30_000, `${OLD} old messages`)])
  assert.deepEqual(got1, Array.from({ length: OLD }, (_, i) => `old-${i}`))
  assert.equal((await first.metadata({ topics: [topic] })).topics.get(topic).id, oldId)
  assert.ok([...fetchVersions].every(v => v >= 13), `fetches by id, versions ${[...fetchVersions]}`)
  let seen = -2n
  await Promise.race([(async () => { while ((seen = await committed(admin)) !== BigInt(OLD)) await sleep(100) })(),
    deadline(30_000, 'the commits')]).catch(e => assert.fail(`${e.message}: committed offset ${seen}, messages read ${got1.length}`))

  // Delete, create again, write the new topic.
  deleted = true
  await admin.deleteTopics({ topics: [topic] })
  const [{ id: newId }] = await admin.createTopics({ topics: [topic], partitions: 1, replicas: 1 })
  assert.notEqual(newId, oldId, 'a new topic id')
  await produce('new', NEW)

  const error = await Promise.race([ended, deadline(30_000, 'the stream by the old id to end')])
  assert.ok(error.findBy?.('apiCode', 100), `ended by UNKNOWN_TOPIC_ID, not: ${error}\n${JSON.stringify(error.errors?.map(e => e.errors?.map(x => x.apiId) ?? e.message))}`)
  assert.deepEqual(after, [], 'nothing read by the old id after the delete')
  await first.close(true)

  // The old topic's offsets went with it.
  let left = -2n
  await Promise.race([(async () => { while ((left = await committed(admin)) !== -1n) await sleep(100) })(),
    deadline(30_000, 'the deleted topic\'s committed offset to go')]).catch(e => assert.fail(`${e.message}: still ${left}`))

  // A new member: the new id, every new message, nothing old.
  const second = member({})
  assert.equal((await second.metadata({ topics: [topic] })).topics.get(topic).id, newId)
  const stream2 = await second.consume({ topics: [topic], mode: 'committed', fallbackMode: 'earliest' })
  const got2 = []
  stream2.on('error', e => got2.push(`error: ${e}`))
  stream2.on('data', m => got2.push(m.value))
  await Promise.race([(async () => { while (got2.length < NEW) await sleep(50) })(), deadline(30_000, `${NEW} new messages (got ${got2})`)])
  await sleep(1000) // one too many would come now
  assert.deepEqual(got2, Array.from({ length: NEW }, (_, i) => `new-${i}`))
  await stream2.close()
  console.log('ok')
} finally {
  for (const c of consumers) await c.close(true).catch(() => {})
  await admin.close().catch(() => {})
}
