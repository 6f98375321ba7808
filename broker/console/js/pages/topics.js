// Topics: every topic with partitions, messages, size and the produce rate (messages per
// second between two refreshes), 100 rows a page with a name filter; #/topics/NAME shows one
// topic's partitions.

import { api, enc } from '../api.js';
import { h, dataTable, card, link, button, text } from '../dom.js';
import * as fmt from '../format.js';
import { listTopics, topicName, topicMessages, topicBytes } from './model.js';

export const title = 'Topics';
const PAGE_ROWS = 100;

export function mount(root, route) {
  if (route.args[0]) return mountDetail(root, route.args[0]);

  const prev = new Map();  // name -> {messages, at}
  const rates = new Map();
  let all = [];
  let page = 0;

  const cTopics = card('Topics', 'topics-count');
  const cMessages = card('Messages', 'topics-messages');
  const cBytes = card('Size', 'topics-bytes');
  const cRate = card('Produce rate', 'topics-rate');
  const filter = h('input', { type: 'search', placeholder: 'Filter by name', 'aria-label': 'Filter topics by name' });
  const pageInfo = h('span', { class: 'muted', 'data-testid': 'topics-page' });
  const prevBtn = button('Previous', () => { page = Math.max(0, page - 1); render(); });
  const nextBtn = button('Next', () => { page += 1; render(); });

  const table = dataTable({
    testid: 'topics-table',
    rowKey: (t) => t.name,
    empty: 'No topics yet.',
    columns: [
      { key: 'topic', label: 'Topic', value: (t) => t.name, render: (t) => link(t.name, `#/topics/${enc(t.name)}`) },
      { key: 'partitions', label: 'Partitions', num: true, value: (t) => t.partitions, render: (t) => fmt.num(t.partitions) },
      { key: 'messages', label: 'Messages', num: true, value: (t) => t.messages, render: (t) => fmt.num(t.messages) },
      { key: 'bytes', label: 'Size', num: true, value: (t) => t.bytes, render: (t) => fmt.bytes(t.bytes) },
      { key: 'rate', label: 'Rate (msg/s)', num: true, value: (t) => rates.get(t.name) ?? '', render: (t) => (rates.has(t.name) ? rates.get(t.name).toFixed(1) : '-') },
      { key: 'created', label: 'Created', value: (t) => t.created_ms, render: (t) => fmt.time(t.created_ms) },
    ],
  });

  root.append(
    h('h1', {}, 'Topics'),
    h('div', { class: 'cards' }, cTopics.el, cMessages.el, cBytes.el, cRate.el),
    h('div', { class: 'toolbar' }, filter, h('span', { class: 'spacer' }), pageInfo, prevBtn, nextBtn),
    table.el,
  );
  filter.addEventListener('input', () => { page = 0; render(); });

  function render() {
    const f = filter.value.trim().toLowerCase();
    const shown = f ? all.filter((t) => t.name.toLowerCase().includes(f)) : all;
    const pages = Math.max(1, Math.ceil(shown.length / PAGE_ROWS));
    page = Math.min(page, pages - 1);
    table.update(shown.slice(page * PAGE_ROWS, (page + 1) * PAGE_ROWS));
    text(pageInfo, `${fmt.num(shown.length)} topics · page ${page + 1} of ${pages}`);
    prevBtn.disabled = page === 0;
    nextBtn.disabled = page >= pages - 1;
  }

  return {
    async refresh() {
      const topics = await listTopics();
      const now = performance.now();
      let total = 0;
      let size = 0;
      let rate = 0;
      all = topics.map((t) => {
        const row = {
          name: topicName(t),
          partitions: t.partitions,
          messages: topicMessages(t),
          bytes: topicBytes(t),
          created_ms: t.created_ms,
        };
        const p = prev.get(row.name);
        if (p && now > p.at) {
          const r = Math.max(0, ((row.messages - p.messages) * 1000) / (now - p.at));
          rates.set(row.name, r);
          rate += r;
        }
        prev.set(row.name, { messages: row.messages, at: now });
        total += row.messages;
        size += row.bytes;
        return row;
      });
      all.sort((a, b) => a.name.localeCompare(b.name));
      cTopics.set(fmt.num(all.length));
      cMessages.set(fmt.num(total));
      cBytes.set(fmt.bytes(size));
      cRate.set(prev.size && rates.size ? `${rate.toFixed(1)}/s` : '-');
      render();
    },
  };
}

function mountDetail(root, name) {
  const info = h('p', { class: 'muted' });
  const table = dataTable({
    testid: 'partitions-table',
    rowKey: (p) => p.partition,
    columns: [
      { key: 'partition', label: 'Partition', num: true, value: (p) => p.partition ?? 0 },
      { key: 'start_offset', label: 'Start offset', num: true, value: (p) => p.start_offset ?? 0, render: (p) => fmt.num(p.start_offset ?? 0) },
      { key: 'end_offset', label: 'End offset', num: true, value: (p) => p.end_offset ?? 0, render: (p) => fmt.num(p.end_offset ?? 0) },
      { key: 'messages', label: 'Messages', num: true, value: (p) => Math.max(0, (p.end_offset ?? 0) - (p.start_offset ?? 0)), render: (p) => fmt.num(Math.max(0, (p.end_offset ?? 0) - (p.start_offset ?? 0))) },
      { key: 'bytes', label: 'Size', num: true, value: (p) => p.bytes ?? 0, render: (p) => fmt.bytes(p.bytes ?? 0) },
    ],
  });
  root.append(
    h('p', {}, link('← Topics', '#/topics')),
    h('h1', {}, 'Topic ', h('span', { class: 'mono', 'data-testid': 'topic-name' }, name)),
    info,
    table.el,
  );
  return {
    async refresh() {
      const t = await api('GET', `/v1/topics/${enc(name)}`);
      const topic = t.topic && typeof t.topic === 'object' ? t.topic : t;
      text(info, `${fmt.num(topic.partitions)} partitions · retention ${topic.retention_ms ? fmt.duration(topic.retention_ms) : 'unlimited'} by age, ${topic.retention_bytes ? fmt.bytes(topic.retention_bytes) : 'unlimited'} by size · created ${fmt.time(topic.created_ms)}`);
      table.update(topic.partition_info || []);
    },
  };
}
