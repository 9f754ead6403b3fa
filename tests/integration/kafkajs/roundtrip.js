// Produces keyed messages with KafkaJS, reads them back, and checks content
// and per-key order. Usage: node roundtrip.js HOST:PORT TOPIC COUNT
const { Kafka, logLevel, CompressionTypes } = require('kafkajs');

async function main() {
  const [bootstrap, topic, countArg] = process.argv.slice(2);
  const count = parseInt(countArg, 10);
  const kafka = new Kafka({ clientId: 'sluice-it', brokers: [bootstrap], logLevel: logLevel.ERROR });

  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 3 }], waitForLeaders: true });
  const listed = await admin.listTopics();
  if (!listed.includes(topic)) throw new Error(`topic ${topic} not listed: ${listed}`);

  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  for (let i = 0; i < count; i += 100) {
    const messages = [];
    for (let j = i; j < Math.min(i + 100, count); j++) {
      messages.push({ key: `k${j % 7}`, value: `${j}`, headers: { n: `${j}` } });
    }
    await producer.send({ topic, acks: -1, compression: CompressionTypes.GZIP, messages });
  }
  await producer.disconnect();

  const offsets = await admin.fetchTopicOffsets(topic);
  const total = offsets.reduce((s, p) => s + (parseInt(p.high, 10) - parseInt(p.low, 10)), 0);
  if (total !== count) throw new Error(`expected ${count} messages in the topic, offsets say ${total}`);

  // Read every partition from the beginning with the low-level fetch path
  // through a consumer without group commits: each partition is consumed by
  // one consumer instance subscribed from the beginning.
  const consumer = kafka.consumer({ groupId: `g-${topic}`, sessionTimeout: 10000 });
  const seen = new Map();
  let got = 0;
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const done = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out with ${got}/${count}`)), 60000);
    consumer.run({
      eachMessage: async ({ message }) => {
        const key = message.key.toString();
        const value = parseInt(message.value.toString(), 10);
        if (message.headers.n.toString() !== `${value}`) throw new Error('header mismatch');
        const last = seen.has(key) ? seen.get(key) : -1;
        if (value <= last) throw new Error(`key ${key}: ${value} after ${last}`);
        seen.set(key, value);
        if (++got === count) { clearTimeout(timer); resolve(); }
      },
    });
  });
  await done;
  await consumer.disconnect();
  await admin.deleteTopics({ topics: [topic] });
  await admin.disconnect();
  console.log(`ok ${got}`);
}

main().catch((e) => { console.error(e); process.exit(1); });
