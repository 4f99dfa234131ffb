'use strict';
// The TypeScript client test's driver (lab/testsuite/tsclient_test.go): it reads
// one JSON step a line on standard input, runs it through courier.js against
// the server TEMPORAL_ADDRESS and namespace TEMPORAL_NAMESPACE name, and
// answers each with one JSON line on standard output, so the Go test can
// look at the destinations between steps.

const fs = require('node:fs');
const readline = require('node:readline');
const { Client, Connection } = require('@temporalio/client');
const { Courier, canonicalJSON, fingerprint, key, sent } = require('./courier');

// The payloads, written as a JavaScript caller writes them.
const payloads = {
  ticket: (id) => ({ request_id: id, subject: `TypeScript ticket ${id}` }),
  other: (id) => ({ request_id: id, subject: 'another subject for the same operation' }),
  // The SDK sends these numbers as JSON.stringify writes them: 100 and 1.
  numbers: (id) => ({ request_id: id, subject: 'Workshop seats', seats: 1e2, ratio: 1.0 }),
  array: (id) => [id, 'a list is not a payload'],
  oversize: (id) => ({ request_id: id, subject: 'Too large', notes: 'x'.repeat(256 * 1024) }),
};

// texts are payloads as a caller may hold them before its SDK encodes them:
// the body of an upstream request, say.
const texts = {
  numbers: (id) => `{"request_id": ${JSON.stringify(id)}, "subject": "Workshop seats", "seats": 1e2, "ratio": 1.0}`,
};

// vectors checks key and canonicalJSON against docs/keys.md's test vectors.
function vectors(path) {
  const doc = JSON.parse(fs.readFileSync(path, 'utf8'));
  const failures = [];
  for (const v of doc.vectors) {
    const got = { key: key(v.operation), canonical: canonicalJSON(v.payload), fingerprint: fingerprint(v.payload) };
    for (const [field, want] of [['key', v.key], ['canonical', v.canonical_payload], ['fingerprint', v.fingerprint]]) {
      if (got[field] !== want) failures.push(`${v.name}: ${field} ${JSON.stringify(got[field])}, want ${JSON.stringify(want)}`);
    }
  }
  for (const v of doc.invalid_payloads) {
    const bytes = v.payload_hex !== undefined ? Buffer.from(v.payload_hex, 'hex') : Buffer.from(v.payload, 'utf8');
    try {
      canonicalJSON(bytes);
      failures.push(`${v.name}: accepted, want rejected (${v.reason})`);
    } catch {
      // rejected, as it must be
    }
  }
  return { checked: doc.vectors.length + doc.invalid_payloads.length, failures };
}

async function run(courier, step) {
  switch (step.op) {
    case 'vectors':
      return vectors(step.path);
    case 'key':
      return { key: key(step.operation) };
    case 'deliver': {
      const id = step.operation.business_id;
      const payload = payloads[step.payload](id);
      const opts = { caller: step.caller, unchecked: step.unchecked };
      let text;
      if (step.fingerprint_of_text) {
        text = texts[step.payload](id);
        opts.fingerprintOf = text;
      }
      const bytes = sent(payload);
      const extra = { sent: bytes.length <= 4096 ? bytes : undefined, text };
      try {
        return { ...(await courier.deliver(step.operation, payload, opts)), ...extra };
      } catch (err) {
        if (err.type === undefined) throw err;
        return { ...extra, refused: { type: err.type, message: err.message, details: err.details, via: err.via } };
      }
    }
    case 'status':
      return { status: await courier.status(step.key) };
    case 'result':
      return { result: await courier.result(step.key) };
    case 'review':
      try {
        return { record: await courier.review(step.key, step.decision) };
      } catch (err) {
        if (err.type === undefined) throw err;
        return { refused: { type: err.type, message: err.message, details: err.details, via: err.via } };
      }
    default:
      throw new Error(`unknown step ${JSON.stringify(step.op)}`);
  }
}

async function main() {
  const connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS });
  const client = new Client({ connection, namespace: process.env.TEMPORAL_NAMESPACE });
  const courier = new Courier(client);
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    if (!line.trim()) continue;
    let answer;
    try {
      answer = { ok: true, ...(await run(courier, JSON.parse(line))) };
    } catch (err) {
      answer = { ok: false, error: String(err && err.stack ? err.stack : err) };
    }
    process.stdout.write(`${JSON.stringify(answer)}\n`);
  }
  await connection.close();
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}

module.exports = { vectors };
