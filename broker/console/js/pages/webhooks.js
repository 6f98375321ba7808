// Webhook subscriptions: state, backlog, exhausted, in flight; #/webhooks/ID shows the attempt
// log (newest first) and replays the messages published since a time, behind a confirmation.

import { enc } from '../api.js';
import { h, dataTable, link, button, text, pill } from '../dom.js';
import * as fmt from '../format.js';
import { field } from '../dialogs.js';
import { listWebhooks, listAttempts, replay } from './model.js';

export const title = 'Webhooks';
const SHOWN_ATTEMPTS = 200;

const state = (w) => (w.disabled ? 'disabled' : 'active');

export function mount(root, route, ctx) {
  if (route.args[0]) return mountDetail(root, route.args[0], ctx);
  const table = dataTable({
    testid: 'webhooks-table',
    rowKey: (w) => w.id,
    empty: 'No webhook subscriptions.',
    columns: [
      { key: 'id', label: 'Id', cls: 'mono', value: (w) => w.id, render: (w) => link(w.id, `#/webhooks/${enc(w.id)}`) },
      { key: 'topic', label: 'Topic', value: (w) => w.topic ?? '' },
      { key: 'url', label: 'URL', cls: 'wrap', value: (w) => w.url ?? '' },
      { key: 'state', label: 'State', value: state, render: (w) => pill(state(w)) },
      { key: 'backlog', label: 'Backlog', num: true, value: (w) => w.backlog ?? 0, render: (w) => fmt.num(w.backlog ?? 0) },
      { key: 'in_flight', label: 'In flight', num: true, value: (w) => w.in_flight ?? 0 },
      { key: 'exhausted', label: 'Exhausted', num: true, value: (w) => w.exhausted ?? 0, render: (w) => fmt.num(w.exhausted ?? 0) },
      { key: 'created', label: 'Created', value: (w) => w.created_ms ?? 0, render: (w) => fmt.time(w.created_ms) },
    ],
  });
  root.append(h('h1', {}, 'Webhooks'), table.el);
  return {
    async refresh() {
      const list = await listWebhooks();
      list.sort((a, b) => String(a.id).localeCompare(String(b.id)));
      table.update(list);
    },
  };
}

// "10m", "2h", "1d" ago, or a date and time: the replay's start in Unix ms (NaN when neither).
function sinceMs(input) {
  const m = /^(\d+)\s*(s|m|h|d)$/.exec(input.trim());
  if (m) return Date.now() - Number(m[1]) * { s: 1e3, m: 6e4, h: 3.6e6, d: 8.64e7 }[m[2]];
  return Date.parse(input.trim());
}

function mountDetail(root, id, ctx) {
  const info = h('p', { class: 'muted', 'data-testid': 'webhook-info' });
  const replayBtn = button('Replay…', async () => {
    const input = h('input', { type: 'text', value: '10m', placeholder: '10m, 2h or 2026-11-26T10:00:00Z' });
    const ok = await ctx.confirm({
      title: 'Replay messages',
      message: `Send the messages of this subscription's topic published since the time below once more to ${id} (one attempt each, outside the schedule)?`,
      ok: 'Replay',
      extra: field('Since (duration ago or UTC time)', input),
    });
    if (!ok) return;
    const since = sinceMs(input.value);
    if (!Number.isFinite(since)) {
      ctx.toast(`"${input.value}" is neither a duration like 10m nor a time`, true);
      return;
    }
    try {
      const n = await replay(id, Math.floor(since));
      ctx.toast(`Queued ${fmt.num(n)} messages for ${id}.`);
    } catch (err) {
      ctx.toast(`Replay failed: ${err.message}`, true);
    }
    await ctx.refresh();
  }, { class: 'primary', 'data-action': 'replay' });

  const table = dataTable({
    testid: 'attempts-table',
    rowKey: (a) => `${a.message_id}/${a.attempt}/${a.time_ms}/${a.replay ? 'r' : ''}`,
    empty: 'No attempts yet.',
    columns: [
      { key: 'time', label: 'Time', value: (a) => a.time_ms ?? 0, render: (a) => fmt.time(a.time_ms) },
      { key: 'message', label: 'Message', cls: 'mono', value: (a) => a.message_id ?? '' },
      { key: 'attempt', label: 'Attempt', num: true, value: (a) => a.attempt ?? 0, render: (a) => `${a.attempt ?? 0}${a.replay ? ' (replay)' : ''}` },
      { key: 'status', label: 'Status', num: true, value: (a) => a.status ?? 0, render: (a) => (a.status ? String(a.status) : '-') },
      { key: 'latency', label: 'Latency', num: true, value: (a) => a.latency_ms ?? 0, render: (a) => `${a.latency_ms ?? 0}ms` },
      { key: 'outcome', label: 'Outcome', value: (a) => fmt.enumText(a.outcome, 'WEBHOOK_'), render: (a) => pill(fmt.enumText(a.outcome, 'WEBHOOK_')) },
      { key: 'error', label: 'Error', cls: 'wrap', value: (a) => a.error ?? '' },
    ],
  });
  root.append(
    h('p', {}, link('← Webhooks', '#/webhooks')),
    h('h1', {}, 'Webhook ', h('span', { class: 'mono', 'data-testid': 'webhook-id' }, id)),
    h('div', { class: 'toolbar' }, info, h('span', { class: 'spacer' }), replayBtn),
    h('h2', {}, 'Attempt log'),
    table.el,
  );
  return {
    async refresh() {
      const [hooks, attempts] = await Promise.all([listWebhooks(), listAttempts(id, SHOWN_ATTEMPTS)]);
      const w = hooks.find((x) => x.id === id);
      text(info, w
        ? `${w.topic} → ${w.url} · ${state(w)} · backlog ${fmt.num(w.backlog ?? 0)} · in flight ${fmt.num(w.in_flight ?? 0)} · exhausted ${fmt.num(w.exhausted ?? 0)}`
        : 'This subscription no longer exists.');
      table.update(attempts);  // already the newest SHOWN_ATTEMPTS, newest first
    },
  };
}
