// @platformatic/kafka 2.12 against sluice: a classic consumer group with
// commits, as an application would use it. Drives Produce v11 (idempotent,
// InitProducerId), Metadata, FindCoordinator, JoinGroup/SyncGroup/Heartbeat/
// LeaveGroup, Fetch, OffsetCommit/OffsetFetch, DescribeGroups, ListGroups and
// DescribeCluster at the highest versions both sides know.
//
// Checks: N numbered messages produced idempotently over 3 partitions are all
// read once by a member that commits each one by hand (autocommit off); while
// it runs, DescribeGroups shows the group Stable with that member and its
// assignment, and ListGroups lists it; the committed offsets read through the
// admin client are the partitions' ends; a second member of the same group
// (autocommit on) resumes there and reads only what was produced after; the
// group is Empty once both left, with its offsets kept; DescribeCluster names
// the broker that Metadata names.
//
// The topic is auto-created by the producer: the broker must be started with
// num.partitions=3. Usage: node group_consume.mjs HOST:PORT TOPIC; prints "ok".
import assert from 'node:assert/strict'
import { Admin, Connection, Consumer, Producer, describeClusterV1, stringDeserializers } from '@platformatic/kafka'

const [bootstrap, topic] = process.argv.slice(2)
const [host, portText] = bootstrap.split(':')
const group = `${topic}-group`
const PARTITIONS = 3
const FIRST = 30 // messages read by the first member
const SECOND = 9 // messages produced after it left

const deadline = (ms, what) => new Promise((_, reject) => setTimeout(() => reject(new Error(`timed out: ${what}`)), ms).unref())

async function produce (producer, from, to) {
  const messages = []
  for (let i = from; i < to; i++) {
    messages.push({ topic, partition: i % PARTITIONS, key: Buffer.from(`k${i}`), value: Buffer.from(`m${i}`) })
  }
  await producer.send({ messages })
}

// Reads from `stream` until `count` messages came, calling onMessage on each;
// then waits a little more so a message too many would be seen too.
async function take (stream, count, onMessage) {
  const got = []
  let chain = Promise.resolve() // onMessage (a commit) runs in message order
  await Promise.race([
    new Promise((resolve, reject) => {
      stream.on('error', reject)
      stream.on('data', async message => {
        got.push(message)
        try {
          await (chain = chain.then(() => onMessage?.(message)))
        } catch (e) {
          reject(e)
        }
        if (got.length === count) setTimeout(resolve, 1500)
      })
    }),
    deadline(30_000, `${count} messages (got ${got.length})`)
  ])
  return got
}

// Committed offsets of `group` for `topic`, through the admin client (OffsetFetch).
async function committed (admin) {
  const [g] = await admin.listConsumerGroupOffsets({ groups: [group] })
  assert.equal(g.groupId, group)
  const t = g.topics.find(t => t.name === topic)
  assert.ok(t, `committed offsets name ${topic}: ${JSON.stringify(g.topics.map(t => t.name))}`)
  return t.partitions.sort((a, b) => a.partitionIndex - b.partitionIndex).map(p => p.committedOffset)
}

const perPartition = n => Array.from({ length: PARTITIONS }, (_, p) => BigInt(Math.ceil((n - p) / PARTITIONS)))

const producer = new Producer({ clientId: 'sluice-it', bootstrapBrokers: [bootstrap], idempotent: true, autocreateTopics: true })
const admin = new Admin({ clientId: 'sluice-it', bootstrapBrokers: [bootstrap] })
const conn = new Connection('sluice-it')
const consumers = []
const member = autocommit => {
  const c = new Consumer({
    clientId: 'sluice-it', bootstrapBrokers: [bootstrap], groupId: group, autocommit,
    deserializers: stringDeserializers, sessionTimeout: 10_000, heartbeatInterval: 500, maxWaitTime: 500
  })
  consumers.push(c)
  return c
}
try {
  await produce(producer, 0, FIRST)

  // First member: commits each message itself.
  const first = member(false)
  const stream1 = await first.consume({ topics: [topic], mode: 'committed', fallbackMode: 'earliest' })
  const got1 = await take(stream1, FIRST, m => m.commit())
  assert.deepEqual(got1.map(m => m.value).sort(), Array.from({ length: FIRST }, (_, i) => `m${i}`).sort(), 'each message once')
  for (const m of got1) {
    assert.equal(Number(m.value.slice(1)) % PARTITIONS, m.partition, `${m.value} on the partition it was sent to`)
    assert.equal(m.key, `k${m.value.slice(1)}`)
  }

  // While it is a member: the group as the admin client sees it.
  const described = (await admin.describeGroups({ groups: [group] })).get(group)
  // 2.x reports the state as the broker names it on the wire (1.x upper-cased it).
  assert.equal(described.state, 'Stable')
  assert.equal(described.protocolType, 'consumer')
  assert.equal(described.protocol, 'roundrobin')
  assert.deepEqual([...described.members.keys()], [first.memberId])
  const m = described.members.get(first.memberId)
  assert.equal(m.clientId, 'sluice-it')
  assert.deepEqual(m.metadata.topics, [topic])
  assert.deepEqual([...m.assignments.get(topic).partitions].sort(), [0, 1, 2])
  const listed = await admin.listGroups()
  assert.equal(listed.get(group)?.protocolType, 'consumer', `listGroups: ${JSON.stringify([...listed.keys()])}`)
  assert.equal(listed.get(group).state, 'Stable')

  await stream1.close()
  await first.close() // leaves the group
  assert.deepEqual(await committed(admin), perPartition(FIRST))

  // Second member of the same group, autocommit on: only what came after.
  await produce(producer, FIRST, FIRST + SECOND)
  const second = member(true)
  const stream2 = await second.consume({ topics: [topic], mode: 'committed', fallbackMode: 'earliest' })
  const got2 = await take(stream2, SECOND)
  assert.deepEqual(got2.map(m => m.value).sort(),
    Array.from({ length: SECOND }, (_, i) => `m${FIRST + i}`).sort(), 'resumes from the committed offsets')
  const want = perPartition(FIRST + SECOND)
  await Promise.race([
    (async () => {
      while (JSON.stringify(await committed(admin), (_, v) => String(v)) !== JSON.stringify(want, (_, v) => String(v))) {
        await new Promise(resolve => setTimeout(resolve, 200))
      }
    })(),
    deadline(15_000, `autocommit to reach ${want}`)
  ])
  await stream2.close()
  await second.close()

  const after = (await admin.describeGroups({ groups: [group] })).get(group)
  assert.equal(after.state, 'Empty')
  assert.equal(after.members.size, 0)
  assert.deepEqual(await committed(admin), want, 'offsets outlive the members')

  // DescribeCluster names the broker Metadata names.
  const md = await admin.metadata({ topics: [] })
  await conn.connect(host, Number(portText))
  const cluster = await describeClusterV1.api.async(conn, false, 1)
  assert.equal(cluster.clusterId, md.id)
  assert.equal(cluster.controllerId, md.controllerId)
  assert.deepEqual(cluster.brokers.map(b => [b.brokerId, b.host, b.port]),
    [...md.brokers].map(([id, b]) => [id, b.host, b.port]))
  console.log('ok')
} finally {
  for (const c of consumers) await c.close(true).catch(() => {})
  await conn.close().catch(() => {})
  await admin.close().catch(() => {})
  await producer.close().catch(() => {})
}
