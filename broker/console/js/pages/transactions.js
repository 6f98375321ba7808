// Transactions that wait for a decision (prepared, abandoned), 50 a page by txid cursor — never
// the whole list, which may hold tens of thousands — with age, check-backs and next check.
// Commit and rollback are operator decisions, each behind a confirmation.

import { enc } from '../api.js';
import { h, dataTable, button, text, link } from '../dom.js';
import * as fmt from '../format.js';
import { listTxs, resolveTx, txState, getTx } from './model.js';

export const title = 'Transactions';

function nextCheck(ms) {
  if (!ms) return '-';
  const left = ms - Date.now();
  return left > 0 ? `in ${fmt.duration(left)}` : 'due';
}
const PAGE_SIZE = 50;
const STATES = [
  ['', 'Prepared and abandoned'],
  ['prepared', 'Prepared'],
  ['abandoned', 'Abandoned'],
  ['all', 'All (resolved too)'],
];

// Asks, then records the operator's decision; the page refreshes to show it.
async function decideTx(ctx, t, outcome) {
  const verb = outcome === 'commit' ? 'Commit' : 'Roll back';
  const ok = await ctx.confirm({
    title: `${verb} transaction`,
    message: `${verb} transaction ${t.txid} of producer group "${t.producer_group}" (${fmt.num(t.messages)} messages for ${(t.topics || []).join(', ')})? This is recorded as an operator decision and cannot be undone.`,
    ok: verb,
  });
  if (!ok) return;
  try {
    await resolveTx(t.txid, outcome);
    ctx.toast(`${outcome === 'commit' ? 'Committed' : 'Rolled back'} ${t.txid}.`);
  } catch (err) {
    ctx.toast(`${verb} failed: ${err.code ? `${err.code}: ` : ''}${err.message}`, true);
  }
  await ctx.refresh();
}

export function mount(root, route, ctx) {
  if (route.args[0]) return mountDetail(root, route.args[0], ctx);
  let state = route.params.get('state') || '';
  let topic = route.params.get('topic') || '';
  let cursors = [''];  // cursors[i]: the `after` of page i
  let page = 0;
  let next = '';

  const stateSel = h('select', { 'aria-label': 'State', 'data-testid': 'tx-state' },
    STATES.map(([v, label]) => h('option', { value: v, selected: v === state }, label)));
  const topicIn = h('input', { type: 'search', placeholder: 'Topic', value: topic, 'aria-label': 'Only transactions with a message for this topic' });
  const pageInfo = h('span', { class: 'muted', 'data-testid': 'tx-page' });
  const prevBtn = button('Previous', () => { page -= 1; ctx.refresh(); }, { 'data-action': 'prev' });
  const nextBtn = button('Next', () => { cursors[page + 1] = next; page += 1; ctx.refresh(); }, { 'data-action': 'next' });
  const restart = () => { cursors = ['']; page = 0; ctx.refresh(); };
  stateSel.addEventListener('change', () => { state = stateSel.value; restart(); });
  topicIn.addEventListener('change', () => { topic = topicIn.value.trim(); restart(); });

  const decide = (t, outcome) => decideTx(ctx, t, outcome);

  const table = dataTable({
    testid: 'tx-table',
    rowKey: (t) => t.txid,
    empty: 'No transactions in this state.',
    columns: [
      { key: 'txid', label: 'Txid', cls: 'mono', value: (t) => t.txid, render: (t) => link(t.txid, `#/transactions/${enc(t.txid)}`) },
      { key: 'state', label: 'State', value: (t) => txState(t), render: (t) => h('span', { class: `pill ${txState(t)}` }, txState(t)) },
      { key: 'producer_group', label: 'Producer group', value: (t) => t.producer_group ?? '' },
      { key: 'topics', label: 'Topics', value: (t) => (t.topics || []).join(', ') },
      { key: 'messages', label: 'Messages', num: true, value: (t) => t.messages ?? 0 },
      { key: 'age', label: 'Age', num: true, live: true, value: (t) => Math.floor((Date.now() - (t.prepared_ms ?? 0)) / 1000), render: (t) => fmt.duration(Date.now() - (t.prepared_ms ?? 0)) },
      { key: 'checks', label: 'Checks', num: true, value: (t) => t.check_count ?? 0, render: (t) => `${t.check_count ?? 0}${t.check_open ? ' (open)' : ''}` },
      { key: 'next_check', label: 'Next check', live: true, value: (t) => t.next_check_ms ?? 0, render: (t) => nextCheck(t.next_check_ms) },
      {
        key: 'actions', label: '', value: (t) => txState(t),
        render: (t) => (['prepared', 'abandoned'].includes(txState(t))
          ? h('div', { class: 'actions' },
            button('Commit', () => decide(t, 'commit'), { class: 'small', 'data-action': 'commit' }),
            button('Rollback', () => decide(t, 'rollback'), { class: 'small', 'data-action': 'rollback' }))
          : ''),
      },
    ],
  });

  root.append(
    h('h1', {}, 'Transactions'),
    h('div', { class: 'toolbar' }, stateSel, topicIn, h('span', { class: 'spacer' }), pageInfo, prevBtn, nextBtn),
    table.el,
  );

  return {
    async refresh() {
      const r = await listTxs({ state, topic, limit: PAGE_SIZE, after: cursors[page] });
      next = r.next;
      table.update(r.txs);
      text(pageInfo, `page ${page + 1} · ${fmt.num(r.txs.length)} shown`);
      prevBtn.disabled = page === 0;
      nextBtn.disabled = !next;
    },
  };
}

// One transaction (tx show): its state, checks and messages (bodies and headers are dropped
// once it is resolved).
function mountDetail(root, txid, ctx) {
  let tx = null;
  const info = h('p', { class: 'muted', 'data-testid': 'tx-info' });
  const commitBtn = button('Commit', () => tx && decideTx(ctx, tx, 'commit'), { class: 'primary', 'data-action': 'commit', disabled: true });
  const rollbackBtn = button('Rollback', () => tx && decideTx(ctx, tx, 'rollback'), { class: 'danger', 'data-action': 'rollback', disabled: true });
  const table = dataTable({
    testid: 'tx-messages-table',
    rowKey: (m) => m.id ?? '',
    empty: 'No messages (a resolved transaction keeps none).',
    columns: [
      { key: 'id', label: 'Message id', cls: 'mono', value: (m) => m.id ?? '' },
      { key: 'topic', label: 'Topic', value: (m) => m.topic ?? '' },
      { key: 'key', label: 'Key', value: (m) => fmt.bytesField(m, 'key') },
      { key: 'partition', label: 'Partition', num: true, value: (m) => m.partition ?? 0 },
      { key: 'offset', label: 'Offset', num: true, value: (m) => m.offset ?? 0 },
      { key: 'headers', label: 'Headers', cls: 'wrap', value: (m) => Object.entries(m.headers || {}).map(([k, v]) => `${k}=${v}`).join(', ') },
      { key: 'body', label: 'Body', cls: 'wrap mono', value: (m) => fmt.short(fmt.bytesField(m, 'body'), 200) },
    ],
  });
  root.append(
    h('p', {}, link('← Transactions', '#/transactions')),
    h('h1', {}, 'Transaction ', h('span', { class: 'mono', 'data-testid': 'txid' }, txid)),
    h('div', { class: 'toolbar' }, info, h('span', { class: 'spacer' }), commitBtn, rollbackBtn),
    table.el,
  );
  return {
    async refresh() {
      tx = await getTx(txid);
      const st = txState(tx);
      const open = ['prepared', 'abandoned'].includes(st);
      commitBtn.disabled = !open;
      rollbackBtn.disabled = !open;
      const resolved = tx.resolved_ms ? ` · resolved ${fmt.time(tx.resolved_ms)} by ${fmt.enumText(tx.resolved_by, 'RESOLVED_BY_')}` : '';
      text(info, `${st} · producer group ${tx.producer_group} · prepared ${fmt.time(tx.prepared_ms)} (${fmt.duration(Date.now() - tx.prepared_ms)} ago) · ${tx.check_count ?? 0} checks · next check ${nextCheck(tx.next_check_ms)}${resolved}`);
      table.update(tx.message_list || []);
    },
  };
}
