// Dead letters of one group (choose it above the table), newest 100, with redrive.

import { enc } from '../api.js';
import { h, dataTable, button, text } from '../dom.js';
import * as fmt from '../format.js';
import { listGroups, groupName, groupSums, listDeadLetters } from './model.js';
import { confirmRedrive } from './groups.js';

export const title = 'Dead letters';
const LIMIT = 100;

export function mount(root, route, ctx) {
  let group = route.args[0] || '';
  let dead = 0;
  const select = h('select', { 'aria-label': 'Consumer group', 'data-testid': 'dlq-group' });
  select.addEventListener('change', () => ctx.navigate(`#/dead-letters/${enc(select.value)}`));
  const info = h('span', { class: 'muted', 'data-testid': 'dlq-info' });
  const redriveBtn = button('Redrive all', () => confirmRedrive(ctx, group, dead), { class: 'primary', 'data-action': 'redrive', disabled: true });
  const table = dataTable({
    testid: 'dlq-table',
    rowKey: (d) => d.message?.id ?? `${d.message?.topic}/${d.message?.partition}/${d.message?.offset}`,
    empty: group ? 'No dead letters in this group.' : 'Choose a group.',
    columns: [
      { key: 'id', label: 'Message id', cls: 'mono', value: (d) => d.message?.id ?? '' },
      { key: 'topic', label: 'Topic', value: (d) => d.message?.topic ?? '' },
      { key: 'partition', label: 'Partition', num: true, value: (d) => d.message?.partition ?? 0 },
      { key: 'offset', label: 'Offset', num: true, value: (d) => d.message?.offset ?? 0 },
      { key: 'key', label: 'Key', value: (d) => fmt.bytesField(d.message, 'key') },
      { key: 'attempts', label: 'Attempts', num: true, value: (d) => d.attempts ?? 0 },
      { key: 'dead_at', label: 'Dead since', value: (d) => d.dead_at_ms ?? 0, render: (d) => fmt.time(d.dead_at_ms) },
      { key: 'reason', label: 'Reason', cls: 'wrap', value: (d) => d.reason ?? '' },
      { key: 'body', label: 'Body', cls: 'wrap mono', value: (d) => fmt.short(fmt.bytesField(d.message, 'body'), 120) },
    ],
  });
  root.append(
    h('h1', {}, 'Dead letters'),
    h('div', { class: 'toolbar' }, select, info, h('span', { class: 'spacer' }), redriveBtn),
    table.el,
  );

  return {
    async refresh() {
      const groups = (await listGroups()).map((g) => ({ name: groupName(g), dead: groupSums(g).dead }));
      groups.sort((a, b) => (b.dead - a.dead) || a.name.localeCompare(b.name));
      if (!group && groups.length) group = groups[0].name;
      const options = groups.map((g) => h('option', { value: g.name, selected: g.name === group }, `${g.name} (${fmt.num(g.dead)})`));
      if (group && !groups.some((g) => g.name === group)) options.unshift(h('option', { value: group, selected: true }, group));
      // Rebuilding the options while the list is open would close it under the operator.
      if (document.activeElement !== select) select.replaceChildren(...options);
      if (!group) {
        text(info, 'No consumer groups yet.');
        table.update([]);
        return;
      }
      const list = await listDeadLetters(group, LIMIT);
      dead = groups.find((g) => g.name === group)?.dead ?? list.length;
      redriveBtn.disabled = dead === 0;
      text(info, `${fmt.num(dead)} dead letters${dead > list.length ? `, the first ${fmt.num(list.length)} shown` : ''}`);
      table.update(list);
    },
  };
}
