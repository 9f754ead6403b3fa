// @platformatic/kafka 2.12 against sluice: the read-process-write loop of an
// exactly-once application, with the client's transactional producer.
// Each round consumes some input (a read_committed consumer of a group,
// autocommit off), produces one output record per input record, adds the
// group (Transaction.addConsumer: AddOffsetsToTxn) and the consumed offsets
// (Transaction.addOffset: TxnOffsetCommit) to the transaction, and commits
// or aborts it.
//
// The input is IN records over 2 partitions, written plainly. The first
// member runs two committed rounds and one aborted round, then leaves; a new
// member of the group, with a new producer instance of the same
// transactional id (an application restarted), processes the rest in
// committed rounds. Checks:
//   - after the first member's rounds, the group's stable committed offsets
//     (OffsetFetch with require_stable) are those of the committed rounds:
//     the aborted round's offsets did not count;
//   - the new member resumes at exactly those offsets: its first record of
//     each partition is the committed offset, and it is delivered the rest of
//     the input, each record once;
//   - the group ends committed at each partition's end;
//   - a read_committed reader of the output gets each input's output exactly
//     once; a read_uncommitted one also gets the aborted round's outputs
//     (so the aborted round did write them).
//
// Usage: node txn_read_process_write.mjs BOOTSTRAP PREFIX REPLICAS; prints "ok".
import assert from 'node:assert/strict'
import {
  Collected, describeError, READ_COMMITTED, READ_UNCOMMITTED, admin as makeAdmin, consumer, deadline, errorNames, plainProducer,
  sleep, txnProducer
} from './txn_common.mjs'

const [bootstrap, prefix, replicasText] = process.argv.slice(2)
const input = `${prefix}-in`
const output = `${prefix}-out`
const group = `${prefix}-group`
const tid = `${prefix}-tid`
const PARTITIONS = 2
const IN = 30
const WAIT_MS = 60_000
const ROUNDS_FIRST = [[8, 'commit'], [8, 'commit'], [6, 'abort']]
const ROUNDS_SECOND = [[7, 'commit'], [7, 'commit']] // the 14 the first member did not commit

const admin = makeAdmin(bootstrap)
const closers = []
const keep = (client, close = c => c.close(true)) => {
  closers.push(() => close(client))
  return client
}

// One round: the next `n` records of `collected` (from index `from`) in one
// transaction of `producer`, ended by `end`. Returns the records processed.
async function round (collected, from, n, producer, member, end) {
  await collected.until(ms => ms.length >= from + n, WAIT_MS, `${n} input records from #${from}`)
  const batch = collected.messages.slice(from, from + n)
  const tx = await producer.beginTransaction()
  await tx.send({ messages: batch.map(m => ({ topic: output, partition: m.partition, value: `out-${m.value}` })) })
  await tx.addConsumer(member)
  // The last record of each partition carries the offset to commit. The
  // client sends one TxnOffsetCommit per call and merges concurrent ones,
  // so they go one after another.
  const last = new Map()
  for (const m of batch) last.set(m.partition, m)
  for (const m of last.values()) await tx.addOffset(m.raw)
  if (end === 'commit') await tx.commit()
  else await tx.abort()
  return batch
}

// The group's committed offsets once no transaction holds one pending
// (require_stable: UNSTABLE_OFFSET_COMMIT until its marker is applied):
// waits until they equal `want` ([offset per partition]).
async function waitStableOffsets (want, what) {
  let last = 'nothing yet'
  const poll = async () => {
    for (;;) {
      try {
        const [g] = await admin.listConsumerGroupOffsets({ groups: [group], requireStable: true })
        const t = g.topics.find(t => t.name === input)
        const got = t ? t.partitions.sort((a, b) => a.partitionIndex - b.partitionIndex).map(p => p.committedOffset) : []
        last = JSON.stringify(got, (_, v) => String(v))
        if (last === JSON.stringify(want, (_, v) => String(v))) return
      } catch (e) {
        last = `error ${errorNames(e).join(',') || e.message}`
      }
      await sleep(200)
    }
  }
  await Promise.race([poll(), deadline(WAIT_MS, `${what}: stable committed offsets ${JSON.stringify(want, (_, v) => String(v))} (last: ${last})`)])
}

function reader (isolationLevel, name) {
  const c = keep(consumer(bootstrap, `${prefix}-${name}`, isolationLevel))
  return c.consume({ topics: [output], mode: 'earliest' }).then(stream => new Collected(stream))
}

try {
  const replicas = Number(replicasText)
  await admin.createTopics({ topics: [input, output], partitions: PARTITIONS, replicas })
  const plain = keep(plainProducer(bootstrap))
  const inputs = Array.from({ length: IN }, (_, i) => ({ topic: input, partition: i % PARTITIONS, value: `in${i}` }))
  await plain.send({ messages: inputs })

  // The first member: two committed rounds, one aborted.
  const first = keep(consumer(bootstrap, group, READ_COMMITTED))
  const producer1 = keep(txnProducer(bootstrap, tid))
  const seen1 = new Collected(await first.consume({ topics: [input], mode: 'committed', fallbackMode: 'earliest' }))
  const committedRecords = []
  let at = 0
  for (const [n, end] of ROUNDS_FIRST) {
    const batch = await round(seen1, at, n, producer1, first, end)
    if (end === 'commit') committedRecords.push(...batch)
    at += n
  }
  const want1 = Array.from({ length: PARTITIONS }, (_, p) =>
    committedRecords.filter(m => m.partition === p).reduce((o, m) => (m.offset + 1n > o ? m.offset + 1n : o), 0n))
  assert.ok(want1.every(o => o > 0n), `both partitions had committed records: ${want1}`)
  await waitStableOffsets(want1, 'after the first member')
  await first.close(true) // leaves the group (force: its stream too)

  // A new member and a new producer instance of the same transactional id.
  const second = keep(consumer(bootstrap, group, READ_COMMITTED))
  const producer2 = keep(txnProducer(bootstrap, tid))
  const seen2 = new Collected(await second.consume({ topics: [input], mode: 'committed', fallbackMode: 'earliest' }))
  at = 0
  for (const [n, end] of ROUNDS_SECOND) {
    await round(seen2, at, n, producer2, second, end)
    at += n
  }
  // (A partition the first member committed to its end has nothing left.)
  const ends = Array.from({ length: PARTITIONS }, (_, p) => BigInt(inputs.filter(m => m.partition === p).length))
  for (let p = 0; p < PARTITIONS; p++) {
    const firstOfPartition = seen2.messages.find(m => m.partition === p)
    assert.equal(firstOfPartition?.offset, want1[p] < ends[p] ? want1[p] : undefined,
      `partition ${p}: the new member resumes at the committed offset ${want1[p]} (end ${ends[p]})`)
  }
  const rest = inputs.map(m => m.value).filter(v => !committedRecords.some(m => m.value === v))
  assert.deepEqual(seen2.values().slice(0, at).sort(), rest.sort(), 'the new member gets exactly what was not committed')
  await waitStableOffsets(ends, 'after the new member')
  // Nothing past the input's end: the input holds IN records, so a record
  // delivered beyond them is one delivered twice.
  assert.equal(seen2.messages.length, at, `the new member was delivered ${seen2.values()}`)

  // Each input's output exactly once. Per partition the output log is
  // [first member's committed][aborted][new member's committed]; having all
  // of the last proves nothing aborted comes after.
  const wanted = inputs.map(m => `out-${m.value}`).sort()
  const committed = await reader(READ_COMMITTED, 'rc')
  await committed.until(ms => wanted.every(w => ms.some(m => m.value === w)), WAIT_MS, 'read_committed: every output')
  assert.deepEqual(committed.values().sort(), wanted, 'each input\'s output exactly once')
  const aborted = ROUNDS_FIRST.reduce((n, [k, end]) => n + (end === 'abort' ? k : 0), 0)
  const everything = await reader(READ_UNCOMMITTED, 'ru')
  await everything.until(ms => ms.length >= IN + aborted, WAIT_MS, 'read_uncommitted: every output record')
  const counts = new Map()
  for (const v of everything.values()) counts.set(v, (counts.get(v) ?? 0) + 1)
  assert.equal([...counts.values()].filter(k => k === 2).length, aborted, 'the aborted round\'s outputs are in the log')
  assert.equal(everything.messages.length, IN + aborted)
  console.log('ok')
} catch (e) {
  process.stderr.write(describeError(e))
  process.exitCode = 1
} finally {
  for (const close of closers.reverse()) await close().catch(() => {})
  await admin.close().catch(() => {})
}
