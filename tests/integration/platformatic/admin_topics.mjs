// @platformatic/kafka 2.12 against sluice: creating and deleting topics
// through its Admin client as an application does, next to topic_ids.mjs
// (which covers DeleteTopics v6 by id and DescribeTopicPartitions). The
// client implements only CreateTopics v7 and DeleteTopics v6 (no fallback
// below) and Metadata v9-v12; topic ids come from Metadata v10+.
//
// Checks: listTopics before and after; createTopics of two topics with 3
// partitions and a config answers each topic's partition count, replication
// factor and the config, and the config is in force (DescribeConfigs); the
// ids CreateTopics answers are those Metadata answers; creating one again is
// TOPIC_ALREADY_EXISTS; deleteTopics by name removes both from listTopics and
// Metadata; deleting them again is UNKNOWN_TOPIC_OR_PARTITION.
//
// Usage: node admin_topics.mjs HOST:PORT TOPIC_PREFIX; prints "ok" on success.
import assert from 'node:assert/strict'
import { Admin, ConfigResourceTypes } from '@platformatic/kafka'

const [bootstrap, prefix] = process.argv.slice(2)
const names = [`${prefix}-1`, `${prefix}-2`]
const ours = topics => topics.filter(t => t.startsWith(`${prefix}-`)).sort()

// Rejects with a response carrying the Kafka error `code` somewhere.
const rejectsWith = (promise, code, what) =>
  assert.rejects(promise, e => (e.findBy?.('apiCode', code) ?? assert.fail(`${what}: not error ${code}: ${e}`)) !== null)

// retries 0: an error answer is checked at once, not retried.
const admin = new Admin({ clientId: 'sluice-it', bootstrapBrokers: [bootstrap], retries: 0 })
try {
  assert.deepEqual(ours(await admin.listTopics()), [])

  const created = await admin.createTopics({
    topics: names, partitions: 3, replicas: 1, configs: [{ name: 'retention.ms', value: '7200000' }]
  })
  assert.deepEqual(created.map(t => t.name).sort(), names)
  for (const t of created) {
    assert.equal(t.partitions, 3)
    assert.equal(t.replicas, 1)
    assert.equal(t.configuration['retention.ms'], '7200000', JSON.stringify(t.configuration))
  }
  assert.deepEqual(ours(await admin.listTopics()), names)

  const md = await admin.metadata({ topics: names, forceUpdate: true })
  for (const t of created) {
    assert.equal(md.topics.get(t.name).id, t.id, `Metadata's id of ${t.name}`)
    assert.equal(md.topics.get(t.name).partitionsCount, 3)
  }
  const described = await admin.describeConfigs({
    resources: names.map(resourceName => ({ resourceType: ConfigResourceTypes.TOPIC, resourceName, configurationKeys: ['retention.ms'] }))
  })
  for (const d of described) {
    assert.equal(d.configs.find(c => c.name === 'retention.ms')?.value, '7200000', `retention.ms of ${d.resourceName}`)
  }

  await rejectsWith(admin.createTopics({ topics: [names[0]], partitions: 1 }), 36, 'created twice')

  await admin.deleteTopics({ topics: names })
  assert.deepEqual(ours(await admin.listTopics()), [])
  const after = await admin.metadata({ topics: [], forceUpdate: true })
  assert.deepEqual(ours([...after.topics.keys()]), [])
  await rejectsWith(admin.deleteTopics({ topics: names }), 3, 'deleted twice')
  console.log('ok')
} finally {
  await admin.close().catch(() => {})
}
