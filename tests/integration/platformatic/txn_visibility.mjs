// @platformatic/kafka 2.12 against sluice: what a transaction's records look
// like to readers, with the client's transactional producer
// (transactionalId, beginTransaction, send, commit, abort) and consumers at
// both isolation levels.
//
// Producer P writes, over 2 partitions (message i to partition i % 2):
//   c0-c19 committed, a0-a9 aborted, d0-d9 committed, o0-o9 left open;
// then producer Q (another transactional id) commits e0-e9 after them.
// Checks:
//   - ListOffsets at read_committed answers, for each partition, the offset
//     of P's first open record (the last stable offset); at
//     read_uncommitted an offset past it (the high watermark).
//   - A read_committed consumer delivers c and d, per partition in log
//     order; a read_uncommitted one delivers every record (aborted and open
//     ones too), per partition in log order.
//   - P aborts its open transaction: the read_committed consumer then
//     delivers e and never o or a. Since a partition is delivered in log
//     order and every e lies after every a and o of its partition, having
//     all of e proves that no a or o was, or will be, delivered.
//   - P opens another transaction (f0-f9) and Q commits g0-g9 after it: the
//     read_committed consumer delivers nothing new while it is open (checked
//     after a second of its fetching, and by arrival time below); once P
//     commits, it delivers f and g, every one of them after the commit call
//     began.
//
// Usage: node txn_visibility.mjs BOOTSTRAP TOPIC REPLICAS; prints "ok".
import assert from 'node:assert/strict'
import {
  Collected, describeError, READ_COMMITTED, READ_UNCOMMITTED, admin as makeAdmin, byPartition, consumer, sleep, txnProducer
} from './txn_common.mjs'

const [bootstrap, topic, replicasText] = process.argv.slice(2)
const PARTITIONS = 2
const WAIT_MS = 60_000

const values = (prefix, n) => Array.from({ length: n }, (_, i) => `${prefix}${i}`)
const messages = vs => vs.map((value, i) => ({ topic, partition: i % PARTITIONS, value }))
const toPartitions = vs => byPartition(vs.map((value, i) => ({ partition: i % PARTITIONS, value })))

// The values of `groups` (lists sent in this order), per partition in log order.
function expected (...groups) {
  const out = new Map(Array.from({ length: PARTITIONS }, (_, p) => [p, []]))
  for (const g of groups) for (const [p, vs] of toPartitions(g)) out.get(p).push(...vs)
  return out
}
const delivered = c => {
  const out = new Map(Array.from({ length: PARTITIONS }, (_, p) => [p, []]))
  for (const [p, vs] of byPartition(c.messages)) out.get(p).push(...vs)
  return out
}
const show = m => JSON.stringify([...m])
const count = groups => groups.reduce((n, g) => n + g.length, 0)

const admin = makeAdmin(bootstrap)
const P = txnProducer(bootstrap, `${topic}-P`)
const Q = txnProducer(bootstrap, `${topic}-Q`)
const consumers = []

async function transaction (producer, vs, end) {
  const tx = await producer.beginTransaction()
  const result = await tx.send({ messages: messages(vs) })
  if (end === 'commit') await tx.commit()
  else if (end === 'abort') await tx.abort()
  return { tx, result }
}

async function latest (isolationLevel) {
  const [t] = await admin.listOffsets({
    topics: [{ name: topic, partitions: Array.from({ length: PARTITIONS }, (_, p) => ({ partitionIndex: p, timestamp: -1n })) }],
    isolationLevel
  })
  return new Map(t.partitions.map(p => [p.partitionIndex, p.offset]))
}

function reader (isolationLevel, name) {
  const c = consumer(bootstrap, `${topic}-${name}`, isolationLevel)
  consumers.push(c)
  return c.consume({ topics: [topic], mode: 'earliest' }).then(stream => new Collected(stream))
}

try {
  await admin.createTopics({ topics: [topic], partitions: PARTITIONS, replicas: Number(replicasText) })

  const c = values('c', 20)
  const a = values('a', 10)
  const d = values('d', 10)
  const o = values('o', 10)
  const e = values('e', 10)
  await transaction(P, c, 'commit')
  await transaction(P, a, 'abort') // sent (awaited) before the abort: in the log
  await transaction(P, d, 'commit')
  const open = await transaction(P, o, 'open')
  await transaction(Q, e, 'commit')

  // The last stable offset is P's first open record in each partition.
  const firstOpen = new Map(open.result.offsets.map(r => [r.partition, r.offset]))
  assert.equal(firstOpen.size, PARTITIONS, `offsets of the open send: ${JSON.stringify(open.result.offsets, (_, v) => String(v))}`)
  const lso = await latest(READ_COMMITTED)
  const hw = await latest(READ_UNCOMMITTED)
  for (let p = 0; p < PARTITIONS; p++) {
    assert.equal(lso.get(p), firstOpen.get(p), `partition ${p}: last stable offset at the open transaction's first record`)
    assert.ok(hw.get(p) > lso.get(p), `partition ${p}: high watermark ${hw.get(p)} past the last stable offset ${lso.get(p)}`)
  }

  const committed = await reader(READ_COMMITTED, 'rc')
  await committed.until(ms => ms.length >= count([c, d]), WAIT_MS, 'read_committed: c and d')
  assert.equal(show(delivered(committed)), show(expected(c, d)), 'read_committed before the open transaction ends')

  const everything = await reader(READ_UNCOMMITTED, 'ru')
  await everything.until(ms => ms.length >= count([c, a, d, o, e]), WAIT_MS, 'read_uncommitted: every record')
  assert.equal(show(delivered(everything)), show(expected(c, a, d, o, e)), 'read_uncommitted sees aborted and open records')
  // Meanwhile the read_committed consumer kept fetching: Q's committed
  // records are still behind P's open transaction.
  assert.equal(show(delivered(committed)), show(expected(c, d)), 'read_committed while a transaction is open before e')

  await open.tx.abort()
  await committed.until(ms => ms.length >= count([c, d, e]), WAIT_MS, 'read_committed: e once the open transaction was aborted')
  assert.equal(show(delivered(committed)), show(expected(c, d, e)), 'read_committed never delivers an aborted record')

  // Open, then committed: nothing of it before the commit.
  const f = values('f', 10)
  const g = values('g', 10)
  const second = await transaction(P, f, 'open')
  await transaction(Q, g, 'commit')
  await sleep(1000) // a few fetches of the consumer (maxWaitTime 300 ms) meet the open transaction
  assert.equal(show(delivered(committed)), show(expected(c, d, e)), 'read_committed while f is open')
  const commitAt = Date.now()
  await second.tx.commit()
  await committed.until(ms => ms.length >= count([c, d, e, f, g]), WAIT_MS, 'read_committed: f and g once committed')
  assert.equal(show(delivered(committed)), show(expected(c, d, e, f, g)), 'read_committed after the commit')
  const early = committed.messages.filter(m => /^[fg]/.test(m.value) && m.at < commitAt)
  assert.deepEqual(early.map(m => m.value), [], 'delivered before the commit began')
  console.log('ok')
} catch (e) {
  process.stderr.write(describeError(e))
  process.exitCode = 1
} finally {
  for (const cons of consumers) await cons.close(true).catch(() => {})
  await P.close().catch(() => {})
  await Q.close().catch(() => {})
  await admin.close().catch(() => {})
}
