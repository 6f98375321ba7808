// Open client connections of the wire protocol: client id, principal, producer group.

import { h, dataTable, card } from '../dom.js';
import * as fmt from '../format.js';
import { listConnections } from './model.js';

export const title = 'Connections';

const pick = (c, ...names) => {
  for (const n of names) if (c[n] !== undefined && c[n] !== null && c[n] !== '') return c[n];
  return '';
};

export function mount(root) {
  const cCount = card('Connections', 'connections-count');
  const cProducers = card('Transactional producers', 'connections-producers');
  const table = dataTable({
    testid: 'connections-table',
    rowKey: (c) => pick(c, 'id', 'connection_id') || `${pick(c, 'remote', 'peer', 'remote_address')}/${pick(c, 'client_id')}`,
    empty: 'No client connections.',
    columns: [
      { key: 'client_id', label: 'Client id', value: (c) => pick(c, 'client_id') },
      { key: 'principal', label: 'Principal', value: (c) => pick(c, 'principal') || '-' },
      { key: 'producer_group', label: 'Producer group', value: (c) => pick(c, 'producer_group') || '-' },
      { key: 'remote', label: 'Address', cls: 'mono', value: (c) => pick(c, 'remote', 'peer', 'remote_address', 'address') },
      { key: 'connected', label: 'Connected', value: (c) => pick(c, 'connected_ms', 'since_ms') || 0, render: (c) => fmt.time(pick(c, 'connected_ms', 'since_ms')) },
      { key: 'in_flight', label: 'In flight', num: true, value: (c) => pick(c, 'in_flight', 'requests_in_flight') || 0 },
    ],
  });
  root.append(h('h1', {}, 'Connections'), h('div', { class: 'cards' }, cCount.el, cProducers.el), table.el);
  return {
    async refresh() {
      const list = await listConnections();
      cCount.set(fmt.num(list.length));
      cProducers.set(fmt.num(list.filter((c) => pick(c, 'producer_group')).length));
      table.update(list);
    },
  };
}
