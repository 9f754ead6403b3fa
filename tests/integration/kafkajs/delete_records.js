// DeleteRecords through KafkaJS's admin (deleteTopicRecords), then the
// partition's offsets as the admin sees them. Prints one JSON line:
// {"low": ..., "high": ...}, or exits non-zero with the error.
// Usage: node delete_records.js HOST:PORT[,HOST:PORT...] TOPIC PARTITION OFFSET
const { Kafka, logLevel } = require('kafkajs');

async function main() {
  const [bootstrap, topic, partitionArg, offset] = process.argv.slice(2);
  const partition = parseInt(partitionArg, 10);
  const kafka = new Kafka({ clientId: 'sluice-it-delete', brokers: bootstrap.split(','), logLevel: logLevel.ERROR });
  const admin = kafka.admin();
  await admin.connect();
  await admin.fetchTopicMetadata({ topics: [topic] });  // deleteTopicRecords needs the leaders
  await admin.deleteTopicRecords({ topic, partitions: [{ partition, offset }] });
  const offsets = await admin.fetchTopicOffsets(topic);
  const p = offsets.find((o) => o.partition === partition);
  await admin.disconnect();
  console.log(JSON.stringify({ low: parseInt(p.low, 10), high: parseInt(p.high, 10) }));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
