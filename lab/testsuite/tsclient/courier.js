'use strict';
// Courier's protocol (docs/protocol.md) for a JavaScript caller, on the
// official TypeScript SDK's client and node's standard library only: the key
// and fingerprint of docs/keys.md, the one-call delivery (Update-with-Start
// of update "deliver"), the status query and the review update.

const crypto = require('node:crypto');
const {
  ApplicationFailure,
  WithStartWorkflowOperation,
  WorkflowExecutionAlreadyStartedError,
  WorkflowFailedError,
  WorkflowUpdateFailedError,
} = require('@temporalio/client');

const TASK_QUEUE = 'courier';
const WORKFLOW_TYPE = 'Delivery';
const KEY_NAMESPACE = 'bd868725-8c48-4f30-877f-3de82f48d062';
const MAX_PAYLOAD_BYTES = 256 * 1024;
const MAX_DEPTH = 10000;
const FIELDS = ['tenant', 'destination', 'operation', 'business_id'];

// key is the operation's UUIDv5 (docs/keys.md, section 1).
function key(op) {
  const parts = [Buffer.from('courier-key-v1')];
  for (const f of FIELDS) {
    const b = Buffer.from(op[f] || '', 'utf8');
    parts.push(Buffer.from(`${b.length}:`), b, Buffer.from(';'));
  }
  const ns = Buffer.from(KEY_NAMESPACE.replace(/-/g, ''), 'hex');
  const h = crypto.createHash('sha1').update(ns).update(Buffer.concat(parts)).digest().subarray(0, 16);
  h[6] = (h[6] & 0x0f) | 0x50;
  h[8] = (h[8] & 0x3f) | 0x80;
  const x = h.toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

// canonicalJSON is the canonical form of a payload's JSON text (docs/keys.md,
// section 2): numbers exactly as written, members sorted by UTF-16 code
// units (JavaScript's own string order), strings written as JSON.stringify
// writes them. It throws for a payload Courier would reject.
function canonicalJSON(bytes) {
  if (typeof bytes === 'string') bytes = Buffer.from(bytes, 'utf8');
  if (bytes.length > MAX_PAYLOAD_BYTES) {
    throw new Error(`payload: ${bytes.length} bytes, the limit is ${MAX_PAYLOAD_BYTES}`);
  }
  let text;
  try {
    // ignoreBOM keeps a byte order mark, which is not JSON white space.
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    throw new Error('payload: invalid UTF-8');
  }
  let i = 0;
  const fail = (what) => {
    throw new Error(`payload: ${what} at offset ${i}`);
  };
  const space = /[ \t\n\r]*/y;
  const skip = () => {
    space.lastIndex = i;
    space.exec(text);
    i = space.lastIndex;
  };
  const match = (re) => {
    re.lastIndex = i;
    const m = re.exec(text);
    if (m) i = re.lastIndex;
    return m && m[0];
  };
  const stringRe = /"(?:[^"\\\u0000-\u001f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"/y;
  const numberRe = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
  const literalRe = /true|false|null/y;
  const string = () => {
    const tok = match(stringRe) || fail('invalid string');
    const s = JSON.parse(tok);
    if (/\p{Surrogate}/u.test(s)) fail('lone UTF-16 surrogate');
    return s;
  };
  const value = (depth) => {
    if (depth > MAX_DEPTH) fail(`nested deeper than ${MAX_DEPTH} levels`);
    skip();
    if (text[i] === '{') {
      i++;
      const members = new Map();
      skip();
      if (text[i] === '}') {
        i++;
        return '{}';
      }
      for (;;) {
        skip();
        if (text[i] !== '"') fail('expected a member name');
        const name = string();
        if (members.has(name)) fail(`duplicate member name ${JSON.stringify(name)}`);
        skip();
        if (text[i++] !== ':') fail("expected ':'");
        members.set(name, value(depth + 1));
        skip();
        const c = text[i++];
        if (c === '}') break;
        if (c !== ',') fail("expected ',' or '}'");
      }
      const names = [...members.keys()].sort();
      return `{${names.map((n) => `${JSON.stringify(n)}:${members.get(n)}`).join(',')}}`;
    }
    if (text[i] === '[') {
      i++;
      const items = [];
      skip();
      if (text[i] === ']') {
        i++;
        return '[]';
      }
      for (;;) {
        items.push(value(depth + 1));
        skip();
        const c = text[i++];
        if (c === ']') break;
        if (c !== ',') fail("expected ',' or ']'");
      }
      return `[${items.join(',')}]`;
    }
    if (text[i] === '"') return JSON.stringify(string());
    return match(numberRe) || match(literalRe) || fail('invalid JSON');
  };
  skip();
  if (text[i] !== '{') throw new Error('payload: must be a JSON object, e.g. {"subject": "..."}');
  const out = value(1);
  skip();
  if (i < text.length) fail('trailing data');
  return out;
}

const sha256 = (s) => crypto.createHash('sha256').update(s, 'utf8').digest('hex');

// fingerprint of a payload's JSON text, numbers as written.
const fingerprint = (text) => sha256(canonicalJSON(text));

// sent is the JSON text the SDK's default converter sends for a value:
// JSON.stringify, which writes 1e2 as 100 and 1.0 as 1. The workflow
// fingerprints that text, not the caller's own.
const sent = (value) => JSON.stringify(value);

// refusal names an update refused by its validator, or a workflow error, by
// its application error type (Conflict, InvalidRequest, InvalidReview,
// NotDelivered, Unconfirmed).
function refusal(err) {
  const cause = err instanceof WorkflowUpdateFailedError || err instanceof WorkflowFailedError ? err.cause : err;
  if (cause instanceof ApplicationFailure) {
    return { type: cause.type, message: cause.message, details: cause.details || [] };
  }
  return null;
}

class CourierError extends Error {
  constructor(type, message, details = [], via = '') {
    super(message);
    this.type = type;
    this.details = details;
    this.via = via;
  }
}

// Courier is the protocol over a connected SDK client.
class Courier {
  constructor(client) {
    this.client = client;
  }

  // deliver starts or joins the delivery of payload (a value) for op and
  // waits until it settles: final, or parked for review. The update carries
  // the payload itself, so the workflow compares it as its SDK sent it.
  // With fingerprintOf (a JSON text), the update carries that text's
  // fingerprint instead, as callers did before payloads could be sent.
  // unchecked skips the local check of the payload, to see the workflow's
  // own answer to an invalid one. An awaiting_review answer may be stale
  // when a review has decided since (docs/protocol.md); not handled here.
  async deliver(op, payload, { caller = crypto.randomUUID(), fingerprintOf, unchecked = false } = {}) {
    const k = key(op);
    const workflowId = `delivery-${k}`;
    const bytes = sent(payload);
    let fp;
    try {
      fp = fingerprint(fingerprintOf === undefined ? bytes : fingerprintOf);
    } catch (err) {
      if (!unchecked) throw new CourierError('InvalidRequest', err.message, [], 'client');
    }
    const arg = fingerprintOf === undefined ? { payload, caller } : { fingerprint: fp, caller };
    // Every caller of one payload shares one update. A payload without a
    // fingerprint (one Courier rejects) has no documented ID: any ID shared
    // by the callers of those bytes will do.
    const updateId = `deliver-${fp || sha256(bytes)}`;
    const start = new WithStartWorkflowOperation(WORKFLOW_TYPE, {
      workflowId,
      taskQueue: TASK_QUEUE,
      args: [{ ...op, payload }],
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
    });
    const out = { key: k, workflow_id: workflowId, fingerprint: fp || '', update_id: updateId, caller };
    // A joined delivery that had delivered is this caller's duplicate.
    const reported = (answer, started) =>
      !started && ['created', 'duplicate', 'delivered_by_review'].includes(answer.status) ? 'duplicate' : answer.status;
    try {
      const answer = await this.client.workflow.executeUpdateWithStart('deliver', { args: [arg], updateId, startWorkflowOperation: start });
      const started = answer.starter === caller;
      return { ...out, answer, started, reported: reported(answer, started) };
    } catch (err) {
      if (err instanceof WorkflowExecutionAlreadyStartedError) {
        // Finished before any update with this ID: its result is the answer,
        // and another payload's result is a conflict. (Not shown: running
        // again after a finished delivery that applied nothing.)
        const res = await this.result(k);
        if (res.fingerprint !== fp) {
          throw new CourierError('Conflict', `delivery ${k} finished with another payload`, [res.fingerprint, fp], 'result');
        }
        const answer = { ...res, state: res.status };
        return { ...out, answer, started: false, reported: reported(answer, false) };
      }
      const r = refusal(err);
      if (r) throw new CourierError(r.type, r.message, r.details, 'update');
      throw err;
    }
  }

  // result waits for the delivery to finish; one that ended without
  // delivering fails with type NotDelivered (nothing applied) or
  // Unconfirmed (an effect may exist), its result the first detail.
  async result(k) {
    try {
      return await this.client.workflow.getHandle(`delivery-${k}`).result();
    } catch (err) {
      const r = refusal(err);
      if (r && (r.type === 'NotDelivered' || r.type === 'Unconfirmed')) return r.details[0];
      throw err;
    }
  }

  async status(k) {
    return this.client.workflow.getHandle(`delivery-${k}`).query('status');
  }

  // review sends a decision through the validated update: a refused one
  // throws with type InvalidReview and changes nothing.
  async review(k, decision) {
    try {
      return await this.client.workflow.getHandle(`delivery-${k}`).executeUpdate('review', { args: [decision] });
    } catch (err) {
      const r = refusal(err);
      if (r) throw new CourierError(r.type, r.message, r.details, 'update');
      throw err;
    }
  }
}

module.exports = { Courier, CourierError, canonicalJSON, fingerprint, key, sent };
