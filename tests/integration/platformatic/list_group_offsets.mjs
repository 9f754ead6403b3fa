// Prints the committed offsets of a group as @platformatic/kafka's admin
// client lists them (OffsetFetch v9 without a member id, every topic), one
// "topic:partition:offset" per line, sorted. Usage: node
// list_group_offsets.mjs HOST:PORT GROUP (test_group_read_your_writes.py).
import { Admin } from '@platformatic/kafka'

const [bootstrap, group] = process.argv.slice(2)
const admin = new Admin({ clientId: 'sluice-it', bootstrapBrokers: [bootstrap] })
try {
  const [g] = await admin.listConsumerGroupOffsets({ groups: [group] })
  const lines = []
  for (const t of g.topics) for (const p of t.partitions) lines.push(`${t.name}:${p.partitionIndex}:${p.committedOffset}`)
  console.log(lines.sort().join('\n'))
} finally {
  await admin.close().catch(() => {})
}
