// Transactions that wait for a decision (prepared, abandoned), 50 a page by txid cursor — never
// the whole list, which may hold tens of thousands — with age, check-backs and next check.
// Commit and rollback are operator decisions, each behind a confirmation.

import { h, dataTable, button, text } from '../dom.js';
import * as fmt from '../format.js';
import { listTxs, resolveTx, txState } from './model.js';

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

export function mount(root, route, ctx) {
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

  async function decide(t, outcome) {
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

  const table = dataTable({
    testid: 'tx-table',
    rowKey: (t) => t.txid,
    empty: 'No transactions in this state.',
    columns: [
      { key: 'txid', label: 'Txid', cls: 'mono', value: (t) => t.txid },
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
