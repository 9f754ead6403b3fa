// What the transaction scripts (txn_*.mjs) share: the clients as they build
// them, a reader that keeps every message a consumer delivered, and the
// error names a failed call carries. Every wait here is for a state the
// broker must reach (a record delivered, an offset stable); each has a
// generous deadline and says what it waited for when it gives up.
import {
  Admin, Consumer, FetchIsolationLevels, Producer, stringDeserializers, stringSerializers
} from '@platformatic/kafka'

export const CLIENT_ID = 'sluice-it'

// Retriable answers (CONCURRENT_TRANSACTIONS while markers are written,
// COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR after a move) are retried
// for up to RETRIES x RETRY_DELAY_MS: the client's default for an
// idempotent producer is to retry forever, which would hang a failing test.
const RETRIES = 60
const RETRY_DELAY_MS = 500

export function deadline (ms, what) {
  return new Promise((_, reject) => setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms).unref())
}

export const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

export function admin (bootstrap) {
  return new Admin({ clientId: CLIENT_ID, bootstrapBrokers: bootstrap.split(','), retries: RETRIES, retryDelay: RETRY_DELAY_MS })
}

// The transaction timeout the client asks for: 2.12 sends its request
// `timeout` as InitProducerId's transaction_timeout_ms, and its default
// (5 s) would let the coordinator abort a transaction a test holds open
// while it reads.
export const TRANSACTION_TIMEOUT_MS = 60_000

// A transactional producer: idempotent (the client requires it) with a
// transactional id; string values.
//
// producerId -1 and producerEpoch -1: 2.12 otherwise sends InitProducerId
// with producer id 0 and epoch 0, which a coordinator reads (KIP-360, v3+)
// as "bump the epoch of my producer id 0". For a transactional id already
// held at another producer id (a restarted application, a new instance
// fencing a zombie) Kafka answers that PRODUCER_FENCED, and so does Sluice;
// -1/-1 is the request of a new instance.
export function txnProducer (bootstrap, transactionalId) {
  return new Producer({
    clientId: CLIENT_ID,
    bootstrapBrokers: bootstrap.split(','),
    idempotent: true,
    transactionalId,
    producerId: -1n,
    producerEpoch: -1,
    timeout: TRANSACTION_TIMEOUT_MS,
    retries: RETRIES,
    retryDelay: RETRY_DELAY_MS,
    serializers: stringSerializers
  })
}

export function plainProducer (bootstrap) {
  return new Producer({
    clientId: CLIENT_ID,
    bootstrapBrokers: bootstrap.split(','),
    idempotent: true,
    retries: RETRIES,
    retryDelay: RETRY_DELAY_MS,
    serializers: stringSerializers
  })
}

export function consumer (bootstrap, groupId, isolationLevel, extra = {}) {
  return new Consumer({
    clientId: CLIENT_ID,
    bootstrapBrokers: bootstrap.split(','),
    groupId,
    autocommit: false,
    isolationLevel,
    deserializers: stringDeserializers,
    sessionTimeout: 10_000,
    heartbeatInterval: 500,
    maxWaitTime: 300,
    retries: RETRIES,
    retryDelay: RETRY_DELAY_MS,
    ...extra
  })
}

export const { READ_COMMITTED, READ_UNCOMMITTED } = FetchIsolationLevels

// Keeps every message `stream` delivers, in delivery order, as
// { value, topic, partition, offset, at } (`at`: Date.now() on arrival).
export class Collected {
  constructor (stream) {
    this.messages = []
    this.error = null
    this.waiters = new Set()
    stream.on('data', m => {
      this.messages.push({ value: m.value, topic: m.topic, partition: m.partition, offset: m.offset, at: Date.now(), raw: m })
      this.#wake()
    })
    stream.on('error', e => {
      this.error = e
      this.#wake()
    })
  }

  #wake () {
    for (const w of this.waiters) w()
  }

  values () {
    return this.messages.map(m => m.value)
  }

  // Resolves once `pred(messages)` holds; rejects on a stream error or
  // after `ms`.
  async until (pred, ms, what) {
    let wake
    const ready = new Promise((resolve, reject) => {
      wake = () => {
        if (this.error) reject(this.error)
        else if (pred(this.messages)) resolve()
      }
      this.waiters.add(wake)
    })
    wake()
    try {
      await Promise.race([ready, deadline(ms, `${what} (delivered: ${JSON.stringify(this.values())})`)])
    } finally {
      this.waiters.delete(wake)
    }
  }
}

// Every Kafka error name (apiId, e.g. PRODUCER_FENCED) in a client error,
// through the MultipleErrors and causes the client wraps them in.
export function errorNames (error) {
  const names = new Set()
  const walk = e => {
    if (!e || typeof e !== 'object') return
    if (typeof e.apiId === 'string') names.add(e.apiId)
    for (const inner of e.errors ?? []) walk(inner)
    walk(e.cause)
  }
  walk(error)
  return [...names]
}

// The errors a fenced producer (an older epoch of its transactional id)
// may be answered: PRODUCER_FENCED (the coordinator; and a partition leader
// whose KIP-890 check asks the coordinator), or INVALID_PRODUCER_EPOCH (a
// partition that holds the newer epoch's marker). A retriable
// CONCURRENT_TRANSACTIONS may come first, while the newer instance's
// markers are being written.
export const FENCING_ERRORS = ['PRODUCER_FENCED', 'INVALID_PRODUCER_EPOCH']

// Values sent to each partition, in the order they were sent: the order a
// consumer must deliver them in.
export function byPartition (messages) {
  const out = new Map()
  for (const m of messages) {
    if (!out.has(m.partition)) out.set(m.partition, [])
    out.get(m.partition).push(m.value)
  }
  return out
}

// A failure as a test report wants it: the message and stack, and every
// Kafka error (name, code, server message, the API) inside it, which Node's
// own print of an AggregateError leaves out.
export function describeError (error) {
  const lines = [error?.stack ?? String(error)]
  const walk = (e, depth) => {
    if (!e || typeof e !== 'object' || depth > 8) return
    if (typeof e.apiId === 'string') {
      lines.push(`  kafka error ${e.apiId} (${e.apiCode})${e.serverErrorMessage ? `: ${e.serverErrorMessage}` : ''}${e.path ? ` at ${e.path}` : ''}`)
    } else if (e !== error && e.message) {
      lines.push(`  ${e.constructor?.name ?? 'error'}: ${e.message}`)
    }
    for (const inner of e.errors ?? []) walk(inner, depth + 1)
    walk(e.cause, depth + 1)
  }
  walk(error, 0)
  return lines.join('\n') + '\n'
}
