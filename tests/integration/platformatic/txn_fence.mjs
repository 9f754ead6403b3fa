// @platformatic/kafka 2.12 against sluice: a zombie fenced by a newer
// producer instance with the same transactional id.
//
// The old instance opens a transaction and writes "zombie" to partition 0.
// A new instance of the same transactional id starts (InitProducerId: the
// coordinator aborts the old transaction and bumps the epoch), writes
// "fresh-0" and "fresh-1" to partitions 0 and 1 and commits. Checks:
//   - the old instance's next send to partition 0 (already in its
//     transaction: straight to the leader, Produce) fails with a fencing
//     error;
//   - its send to partition 1 (new to its transaction: AddPartitionsToTxn to
//     the coordinator first) fails with a fencing error;
//   - its commit (EndTxn) fails with a fencing error;
//   - the new instance commits "final-0" and "final-1" after all that; a
//     read_committed reader gets exactly fresh and final from each
//     partition, a read_uncommitted one "zombie" before them in partition 0:
//     none of the zombie's late records reached a log (they would lie
//     before the final ones).
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
  await tx.send({ messages: [0, 1].map(partition => ({ topic, partition, value: `fresh-${partition}` })) })
  await tx.commit()

  const names = {
    produce: await fenced(zombie.send({ messages: [{ topic, partition: 0, value: 'late-produce' }] }), 'send to a partition in the transaction'),
    addPartitions: await fenced(zombie.send({ messages: [{ topic, partition: 1, value: 'late-add' }] }), 'send to a new partition'),
    commit: await fenced(zombie.commit(), 'commit')
  }
  process.stderr.write(`the zombie was answered: ${JSON.stringify(names)}\n`)

  const last = await young.beginTransaction()
  await last.send({ messages: [0, 1].map(partition => ({ topic, partition, value: `final-${partition}` })) })
  await last.commit()

  const partitions = c => [0, 1].map(p => c.messages.filter(m => m.partition === p).map(m => m.value))
  const committed = await read(READ_COMMITTED, 'rc', 4)
  assert.deepEqual(partitions(committed), [['fresh-0', 'final-0'], ['fresh-1', 'final-1']], 'read_committed')
  const everything = await read(READ_UNCOMMITTED, 'ru', 5)
  assert.deepEqual(partitions(everything), [['zombie', 'fresh-0', 'final-0'], ['fresh-1', 'final-1']], 'read_uncommitted')
  console.log('ok')
} catch (e) {
  process.stderr.write(describeError(e))
  process.exitCode = 1
} finally {
  for (const c of clients.reverse()) await c.close(true).catch(() => {})
  await admin.close().catch(() => {})
}
