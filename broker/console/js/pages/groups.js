// Consumer groups: lag, in flight, waiting retries and dead letters per group, with redrive;
// #/groups/NAME shows the group per partition.

import { enc } from '../api.js';
import { h, dataTable, card, link, button, text } from '../dom.js';
import * as fmt from '../format.js';
import { listGroups, getGroup, groupName, groupSums, redrive } from './model.js';

export const title = 'Groups';

// Asks, redrives, reports: shared by the list and the dead-letters page.
export async function confirmRedrive(ctx, group, dead) {
  const ok = await ctx.confirm({
    title: 'Redrive dead letters',
    message: `Move the ${fmt.num(dead)} dead letters of group "${group}" back to delivery (attempts start again)?`,
    ok: 'Redrive',
  });
  if (!ok) return;
  try {
    const n = await redrive(group);
    ctx.toast(`Redrove ${fmt.num(n)} messages of ${group}.`);
  } catch (err) {
    ctx.toast(`Redrive failed: ${err.message}`, true);
  }
  await ctx.refresh();
}

export function mount(root, route, ctx) {
  if (route.args[0]) return mountDetail(root, route.args[0], ctx);

  const cGroups = card('Groups', 'groups-count');
  const cLag = card('Total lag', 'groups-lag');
  const cDead = card('Dead letters', 'groups-dead');
  const table = dataTable({
    testid: 'groups-table',
    rowKey: (g) => g.name,
    empty: 'No consumer groups yet.',
    columns: [
      { key: 'group', label: 'Group', value: (g) => g.name, render: (g) => link(g.name, `#/groups/${enc(g.name)}`) },
      { key: 'topics', label: 'Topics', cls: 'wrap', value: (g) => g.topics.join(', ') },
      { key: 'lag', label: 'Lag', num: true, value: (g) => g.lag, render: (g) => fmt.num(g.lag) },
      { key: 'in_flight', label: 'In flight', num: true, value: (g) => g.in_flight, render: (g) => fmt.num(g.in_flight) },
      { key: 'waiting', label: 'Waiting', num: true, value: (g) => g.waiting, render: (g) => fmt.num(g.waiting) },
      { key: 'dead_letters', label: 'Dead letters', num: true, value: (g) => g.dead, render: (g) => (g.dead ? link(fmt.num(g.dead), `#/dead-letters/${enc(g.name)}`) : '0') },
      {
        key: 'actions', label: '', value: (g) => (g.dead ? 'redrive' : ''),
        render: (g) => (g.dead ? button('Redrive', () => confirmRedrive(ctx, g.name, g.dead), { class: 'small', 'data-action': 'redrive' }) : ''),
      },
    ],
  });
  root.append(h('h1', {}, 'Consumer groups'), h('div', { class: 'cards' }, cGroups.el, cLag.el, cDead.el), table.el);

  return {
    async refresh() {
      const groups = (await listGroups()).map((g) => ({ name: groupName(g), topics: g.topics || [], ...groupSums(g) }));
      groups.sort((a, b) => a.name.localeCompare(b.name));
      cGroups.set(fmt.num(groups.length));
      cLag.set(fmt.num(groups.reduce((s, g) => s + g.lag, 0)));
      cDead.set(fmt.num(groups.reduce((s, g) => s + g.dead, 0)));
      table.update(groups);
    },
  };
}

function mountDetail(root, name, ctx) {
  const info = h('p', { class: 'muted' });
  let dead = 0;
  const redriveBtn = button('Redrive dead letters', () => confirmRedrive(ctx, name, dead), { 'data-action': 'redrive', disabled: true });
  const table = dataTable({
    testid: 'group-partitions-table',
    rowKey: (p) => `${p.topic}/${p.partition}`,
    columns: [
      { key: 'topic', label: 'Topic', value: (p) => p.topic ?? '' },
      { key: 'partition', label: 'Partition', num: true, value: (p) => p.partition ?? 0 },
      { key: 'acked', label: 'Acked', num: true, value: (p) => p.acked ?? 0, render: (p) => fmt.num(p.acked ?? 0) },
      { key: 'end_offset', label: 'End offset', num: true, value: (p) => p.end_offset ?? 0, render: (p) => fmt.num(p.end_offset ?? 0) },
      { key: 'lag', label: 'Lag', num: true, value: (p) => p.lag ?? 0, render: (p) => fmt.num(p.lag ?? 0) },
      { key: 'in_flight', label: 'In flight', num: true, value: (p) => p.in_flight ?? 0 },
      { key: 'waiting', label: 'Waiting', num: true, value: (p) => p.waiting ?? 0 },
      { key: 'dead', label: 'Dead', num: true, value: (p) => p.dead ?? 0 },
    ],
  });
  root.append(
    h('p', {}, link('← Groups', '#/groups')),
    h('h1', {}, 'Group ', h('span', { class: 'mono', 'data-testid': 'group-name' }, name)),
    h('div', { class: 'toolbar' }, info, h('span', { class: 'spacer' }), link('Dead letters', `#/dead-letters/${enc(name)}`), redriveBtn),
    table.el,
  );
  return {
    async refresh() {
      const g = await getGroup(name);
      const s = groupSums(g);
      dead = s.dead;
      redriveBtn.disabled = dead === 0;
      text(info, `topics ${(g.topics || []).join(', ') || '-'} · lag ${fmt.num(s.lag)} · in flight ${fmt.num(s.in_flight)} · dead letters ${fmt.num(s.dead)} · created ${fmt.time(g.created_ms)}`);
      table.update(g.partitions || []);
    },
  };
}
