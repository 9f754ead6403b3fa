// @platformatic/kafka 2.12 against sluice: a zombie fenced by a newer
// producer instance with the same transactional id.
//
// The old instance opens a transaction and writes "zombie" to partition 0.
// A new instance of the same transactional id starts (InitProducerId: the
// coordinator aborts the old transaction and bumps the epoch), writes
// "fresh" to partition 0 and commits. Checks:
//   - the old instance's next send to partition 0 (already in its
//     transaction: straight to the leader, Produce) fails with a fencing
//     error;
//   - its send to partition 1 (new to its transaction: AddPartitionsToTxn to
//     the coordinator first) fails with a fencing error;
//   - its commit (EndTxn) fails with a fencing error;
//   - the new instance commits "final" after all that; a read_committed
//     reader gets exactly ["fresh", "final"] from partition 0 and nothing
//     from partition 1, and a read_uncommitted one ["zombie", "fresh",
//     "final"] and nothing from partition 1: none of the zombie's late
//     records reached a log (they would lie before "final").
//
// Usage: node txn_fence.mjs BOOTSTRAP TOPIC REPLICAS; prints "ok".
import assert from 'node:assert/strict'
import {
  Collected, describeError, FENCING_ERRORS, READ_COMMITTED, READ_UNCOMMITTED, admin as makeAdmin, consumer, errorNames, txnProducer
} from './txn_common.mjs'

const [bootstrap, topic, replicasText] = process.argv.slice(2)
const tid = `${topic}-tid`
const WAIT_MS = 60_000

const admin = makeAdmin(bootstrap)
const clients = []
const keep = c => {
  clients.push(c)
  return c
}

// Awaits `promise`, which must fail with a fencing error; returns the
// error names it carried.
async function fenced (promise, what) {
  let error = null
  try {
    await promise
  } catch (e) {
    error = e
  }
  assert.ok(error, `${what}: succeeded, but the producer was fenced`)
  const names = errorNames(error)
  assert.ok(names.some(n => FENCING_ERRORS.includes(n)),
    `${what}: failed with ${names.join(', ') || error.message}, not a fencing error (${FENCING_ERRORS.join(', ')})\n${error.stack}`)
  return names
}

async function read (isolationLevel, name, n) {
  const c = keep(consumer(bootstrap, `${topic}-${name}`, isolationLevel))
  const got = new Collected(await c.consume({ topics: [topic], mode: 'earliest' }))
  await got.until(ms => ms.length >= n, WAIT_MS, `${name}: ${n} records`)
  return got
}

try {
  await admin.createTopics({ topics: [topic], partitions: 2, replicas: Number(replicasText) })
  const old = keep(txnProducer(bootstrap, tid))
  const zombie = await old.beginTransaction()
  await zombie.send({ messages: [{ topic, partition: 0, value: 'zombie' }] })
  const oldEpoch = old.producerEpoch

  const young = keep(txnProducer(bootstrap, tid))
  const tx = await young.beginTransaction()
  assert.equal(young.producerId, old.producerId, 'the same transactional id keeps its producer id')
  assert.ok(young.producerEpoch > oldEpoch, `epoch bumped: ${oldEpoch} -> ${young.producerEpoch}`)
  await tx.send({ messages: [{ topic, partition: 0, value: 'fresh' }] })
  await tx.commit()

  const names = {
    produce: await fenced(zombie.send({ messages: [{ topic, partition: 0, value: 'late-produce' }] }), 'send to a partition in the transaction'),
    addPartitions: await fenced(zombie.send({ messages: [{ topic, partition: 1, value: 'late-add' }] }), 'send to a new partition'),
    commit: await fenced(zombie.commit(), 'commit')
  }
  process.stderr.write(`the zombie was answered: ${JSON.stringify(names)}\n`)

  const last = await young.beginTransaction()
  await last.send({ messages: [{ topic, partition: 0, value: 'final' }] })
  await last.commit()

  const committed = await read(READ_COMMITTED, 'rc', 2)
  assert.deepEqual(committed.messages.map(m => [m.partition, m.value]), [[0, 'fresh'], [0, 'final']])
  const everything = await read(READ_UNCOMMITTED, 'ru', 3)
  assert.deepEqual(everything.messages.map(m => [m.partition, m.value]), [[0, 'zombie'], [0, 'fresh'], [0, 'final']])
  // Partition 1 was never written: its end is 0 at both isolation levels.
  for (const isolationLevel of [READ_COMMITTED, READ_UNCOMMITTED]) {
    const [t] = await admin.listOffsets({ topics: [{ name: topic, partitions: [{ partitionIndex: 1, timestamp: -1n }] }], isolationLevel })
    assert.equal(t.partitions[0].offset, 0n, `partition 1 at isolation level ${isolationLevel}`)
  }
  console.log('ok')
} catch (e) {
  process.stderr.write(describeError(e))
  process.exitCode = 1
} finally {
  for (const c of clients.reverse()) await c.close(true).catch(() => {})
  await admin.close().catch(() => {})
}
