// @platformatic/kafka 2.12 against sluice: topic ids (KIP-516) and
// DescribeTopicPartitions (KIP-966) as a current client speaks them. Its
// Admin creates topics with CreateTopics v7 (which answers the new topic's
// id) and deletes them with DeleteTopics v6 by name; its own encoders send
// DeleteTopics v6 by id and page through DescribeTopicPartitions v0 with a
// cursor.
//
// Usage: node topic_ids.mjs HOST:PORT TOPIC_PREFIX; prints "ok" on success.
import assert from 'node:assert/strict'
import { Admin, Connection, deleteTopicsV6, describeTopicPartitionsV0 } from '@platformatic/kafka'

const [bootstrap, prefix] = process.argv.slice(2)
const [host, portText] = bootstrap.split(':')
const zeroId = '00000000-0000-0000-0000-000000000000'
const a = `${prefix}-a`
const b = `${prefix}-b`

const admin = new Admin({ clientId: 'sluice-it', bootstrapBrokers: [bootstrap] })
const conn = new Connection('sluice-it')
try {
  const created = await admin.createTopics({ topics: [a, b], partitions: 4, replicas: 1 })
  const ids = Object.fromEntries(created.map(t => [t.name, t.id]))
  for (const name of [a, b]) assert.ok(ids[name] && ids[name] !== zeroId, `CreateTopics v7 id of ${name}: ${ids[name]}`)
  assert.notEqual(ids[a], ids[b])

  // Three partitions a page over the two topics: every partition once, in
  // order, each topic with the id CreateTopics answered.
  await conn.connect(host, Number(portText))
  const seen = []
  let cursor = null
  for (let page = 0; page < 10; page++) {
    const resp = await describeTopicPartitionsV0.api.async(conn, [{ name: b }, { name: a }], 3, cursor)
    for (const t of resp.topics) {
      assert.equal(t.topicId, ids[t.name])
      for (const p of t.partitions) seen.push(`${t.name}/${p.partitionIndex}`)
    }
    cursor = resp.nextCursor ?? null
    if (!cursor) break
  }
  assert.deepEqual(seen, [0, 1, 2, 3].map(p => `${a}/${p}`).concat([0, 1, 2, 3].map(p => `${b}/${p}`)))

  // By id: answered with the topic's name. Again: the id is gone.
  const deleted = await deleteTopicsV6.api.async(conn, [{ name: null, topicId: ids[a] }], 10000)
  assert.equal(deleted.responses[0].name, a)
  assert.equal(deleted.responses[0].topicId, ids[a])
  await assert.rejects(deleteTopicsV6.api.async(conn, [{ name: null, topicId: ids[a] }], 10000),
    e => e.response?.responses?.[0]?.errorCode === 100)

  // By name through the Admin client (DeleteTopics v6).
  await admin.deleteTopics({ topics: [b] })
  const gone = await describeTopicPartitionsV0.api.async(conn, [{ name: b }], 10, null).catch(e => e.response)
  assert.equal(gone.topics[0].errorCode, 3)
  console.log('ok')
} finally {
  conn.close?.()
  await admin.close()
}
