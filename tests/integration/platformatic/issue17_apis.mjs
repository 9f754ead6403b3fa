// @platformatic/kafka 2.12 against sluice: a current client that speaks the
// versions of issue 17. It picks the highest version both sides know, so
// this drives Produce v11 (idempotent), ListOffsets v9 with MAX_TIMESTAMP,
// DescribeLogDirs v4 through its Admin client, and DescribeCluster v1,
// DescribeProducers v0, JoinGroup v9, SyncGroup v5, OffsetCommit v9,
// OffsetFetch v9, ListGroups v5 and LeaveGroup v5 through its own request
// encoders on one connection, where each version is checked on its own
// (group_consume.mjs drives the same APIs through the client's consumer).
//
// Usage: node issue17_apis.mjs HOST:PORT TOPIC LOG_DIR; prints "ok" on success.
import assert from 'node:assert/strict'
import {
  Admin,
  Connection,
  Producer,
  describeClusterV1,
  describeProducersV0,
  joinGroupV9,
  leaveGroupV5,
  listGroupsV5,
  offsetCommitV9,
  offsetFetchV9,
  syncGroupV5
} from '@platformatic/kafka'

const [bootstrap, topic, logDir] = process.argv.slice(2)
const [host, portText] = bootstrap.split(':')
const port = Number(portText)

// Records whose timestamps are out of order: the largest is neither the first
// nor the last, and a later batch stays below it.
const t0 = BigInt(Date.now() - 60_000)
const first = [t0 + 1n, t0 + 500n, t0 + 2n, t0 + 500n, t0 + 3n]
const second = [t0 + 10n, t0 + 20n, t0 + 30n]

const producer = new Producer({ clientId: 'sluice-it', bootstrapBrokers: [bootstrap], idempotent: true, autocreateTopics: true })
const admin = new Admin({ clientId: 'sluice-it', bootstrapBrokers: [bootstrap] })
const conn = new Connection('sluice-it')
try {
  for (const batch of [first, second]) {
    await producer.send({
      messages: batch.map((ts, i) => ({ topic, partition: 0, key: Buffer.from(`k${i}`), value: Buffer.from(`v${ts}`), timestamp: ts }))
    })
  }

  const [listed] = await admin.listOffsets({ topics: [{ name: topic, partitions: [{ partitionIndex: 0, timestamp: -3n }] }] })
  assert.equal(listed.partitions[0].offset, 1n, 'MAX_TIMESTAMP: the first record with the largest timestamp')
  assert.equal(listed.partitions[0].timestamp, t0 + 500n)

  const dirs = await admin.describeLogDirs({ topics: [{ name: topic, partitions: [0] }] })
  assert.equal(dirs.length, 1)
  const dir = dirs[0].results[0]
  assert.equal(dir.logDir, logDir)
  assert.ok(dir.totalBytes > 0n && dir.usableBytes > 0n, `disk space ${dir.totalBytes} ${dir.usableBytes}`)
  const part = dir.topics.find(t => t.name === topic).partitions[0]
  assert.ok(part.partitionSize > 0n, `partition size ${part.partitionSize}`)

  await conn.connect(host, port)
  const cluster = await describeClusterV1.api.async(conn, false, 1)
  assert.ok(cluster.clusterId.length > 0)
  assert.equal(cluster.brokers.length, 1)
  assert.equal(cluster.brokers[0].port, port)
  assert.equal(cluster.controllerId, cluster.brokers[0].brokerId)

  const producers = await describeProducersV0.api.async(conn, [{ name: topic, partitionIndexes: [0] }])
  const active = producers.topics[0].partitions[0].activeProducers
  assert.equal(active.length, 1, 'one idempotent producer')
  assert.equal(active[0].lastSequence, first.length + second.length - 1)
  assert.equal(active[0].lastTimestamp, t0 + 500n)

  // A classic group of one member, then offsets at v9.
  const group = `${topic}-group`
  const protocols = [{ name: 'range', metadata: Buffer.alloc(0) }]
  let memberId = ''
  try {
    await joinGroupV9.api.async(conn, group, 30000, 30000, '', null, 'consumer', protocols, 'test')
    assert.fail('the first join asks for a member id')
  } catch (e) {
    assert.equal(e.response?.errorCode, 79, String(e))
    memberId = e.response.memberId
  }
  const joined = await joinGroupV9.api.async(conn, group, 30000, 30000, memberId, null, 'consumer', protocols, 'test')
  assert.equal(joined.protocolType, 'consumer')
  assert.equal(joined.protocolName, 'range')
  const synced = await syncGroupV5.api.async(conn, group, joined.generationId, memberId, null, 'consumer', 'range',
    [{ memberId, assignment: Buffer.from([7]) }])
  assert.equal(synced.protocolName, 'range')

  await offsetCommitV9.api.async(conn, group, joined.generationId, memberId, null,
    [{ name: topic, partitions: [{ partitionIndex: 0, committedOffset: 5n, committedLeaderEpoch: -1, committedMetadata: 'm' }] }])
  const fetched = await offsetFetchV9.api.async(conn,
    [{ groupId: group, memberId, memberEpoch: joined.generationId, topics: [{ name: topic, partitionIndexes: [0] }] }], false)
  assert.equal(fetched.groups[0].topics[0].partitions[0].committedOffset, 5n)

  const groups = await listGroupsV5.api.async(conn, [], ['classic'])
  assert.ok(groups.groups.some(g => g.groupId === group && g.groupType === 'classic'))

  await leaveGroupV5.api.async(conn, group, [{ memberId, groupInstanceId: null, reason: 'done' }])
  console.log('ok')
} finally {
  await conn.close().catch(() => {})
  await admin.close().catch(() => {})
  await producer.close().catch(() => {})
}
