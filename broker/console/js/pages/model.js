// Every API route the console calls and the shapes it reads, in one place (docs/http-api.md):
// the answers are the wire protocol's messages as JSON (.proto field names, enums by name).

import { api, enc, query } from '../api.js';

// ---- topics
// Follows the listing's cursor when the broker pages it (admin listings hold ≤ 1,000).
export async function listTopics() {
  const out = [];
  let after = '';
  for (let i = 0; i < 1000; i += 1) {
    const page = await api('GET', `/v1/topics${query({ after })}`);
    const items = Array.isArray(page) ? page : page.topics || [];
    out.push(...items);
    const next = page && !Array.isArray(page) ? page.next_after || page.next : '';
    if (!next || next === after || items.length === 0) break;
    after = next;
  }
  return out;
}
export const topicName = (t) => t.name ?? t.topic ?? '';
export function topicMessages(t) {
  if (typeof t.messages === 'number') return t.messages;
  return (t.partition_info || []).reduce((s, p) => s + Math.max(0, (p.end_offset ?? 0) - (p.start_offset ?? 0)), 0);
}
export function topicBytes(t) {
  if (typeof t.bytes === 'number') return t.bytes;
  return (t.partition_info || []).reduce((s, p) => s + (p.bytes ?? 0), 0);
}

// ---- groups
export async function listGroups() {
  const r = await api('GET', '/v1/groups');
  return Array.isArray(r) ? r : r.groups || [];
}
export async function getGroup(name) {
  const r = await api('GET', `/v1/groups/${enc(name)}`);
  return r.group && typeof r.group === 'object' ? r.group : r;
}
export const groupName = (g) => g.name ?? g.group ?? '';
export function groupSums(g) {
  const s = { lag: 0, in_flight: 0, waiting: 0, dead: 0 };
  for (const p of g.partitions || []) {
    s.lag += p.lag ?? 0;
    s.in_flight += p.in_flight ?? 0;
    s.waiting += p.waiting ?? 0;
    s.dead += p.dead ?? 0;
  }
  if (typeof g.dead_letters === 'number') s.dead = g.dead_letters;
  return s;
}

// ---- dead letters
export async function listDeadLetters(group, limit = 100) {
  const r = await api('GET', `/v1/groups/${enc(group)}/dead-letters${query({ limit })}`);
  return Array.isArray(r) ? r : r.dead_letters || [];
}
export async function redrive(group) {
  const r = await api('POST', `/v1/groups/${enc(group)}/dead-letters/redrive`, {});
  return r && typeof r.redriven === 'number' ? r.redriven : 0;
}

// ---- transactions (paged by txid: never the whole list at once)
export async function listTxs({ state, topic, limit, after }) {
  const r = await api('GET', `/v1/transactions${query({ state, topic, limit, after })}`);
  return { txs: r.txs || r.transactions || [], next: r.next_after_txid || r.next_after || '' };
}
export async function getTx(txid) {
  const r = await api('GET', `/v1/transactions/${enc(txid)}`);
  return r.tx && typeof r.tx === 'object' ? r.tx : r;
}
export async function resolveTx(txid, outcome) {
  return api('POST', `/v1/transactions/${enc(txid)}/${outcome}`, {});
}
export const txState = (t) => String(t.state ?? '').replace(/^TX_STATE_/, '').toLowerCase();

// ---- webhooks
export async function listWebhooks() {
  const r = await api('GET', '/v1/webhooks');
  return Array.isArray(r) ? r : r.webhooks || [];
}
// The latest `limit` attempts, latest first (the log can hold far more than a page).
export async function listAttempts(id, limit = 1000) {
  const r = await api('GET', `/v1/webhooks/${enc(id)}/attempts${query({ limit, order: 'newest' })}`);
  return Array.isArray(r) ? r : r.attempts || [];
}
export async function replay(id, sinceMs) {
  const r = await api('POST', `/v1/webhooks/${enc(id)}/replay`, { since_ms: sinceMs });
  return r && typeof r.queued === 'number' ? r.queued : 0;
}

// ---- connections
export async function listConnections() {
  const r = await api('GET', '/v1/connections');
  return Array.isArray(r) ? r : r.connections || [];
}

// ---- cluster (GET /v1/cluster: the Metadata of the node asked; cluster = false on a single node)
export async function getCluster() {
  return api('GET', '/v1/cluster');
}
