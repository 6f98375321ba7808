// The cluster view. A single broker: the page says "single node" and shows the broker's health
// (/healthz). In cluster mode (DESIGN §8): the nodes, the controller and every partition with
// its leader, epoch, replicas and ISR (GET /v1/cluster, the Metadata of the node asked), the
// under-replicated and leaderless ones first, as `txmq cluster status` lists them.

import { h, card, text, dataTable } from '../dom.js';
import { getCluster } from './model.js';

export const title = 'Cluster';

const ids = (list) => (list || []).join(', ');

// Leaderless first, then under-replicated, then by topic and partition.
function rank(p) {
  if (p.leader < 0) return 0;
  return (p.isr || []).length < (p.replicas || []).length ? 1 : 2;
}

export function mount(root) {
  const mode = card('Mode', 'cluster-mode');
  const node = card('This node', 'cluster-node');
  const health = card('Health', 'cluster-health');
  const controller = card('Controller', 'cluster-controller');
  const under = card('Under-replicated', 'cluster-under-replicated');
  controller.el.hidden = true;
  under.el.hidden = true;
  const note = h('p', { class: 'muted' });
  const nodes = dataTable({
    testid: 'cluster-nodes',
    rowKey: (n) => String(n.id),
    empty: 'No live node.',
    columns: [
      { key: 'id', label: 'Node', num: true, value: (n) => n.id },
      { key: 'address', label: 'Address', cls: 'mono', value: (n) => n.address },
      { key: 'role', label: 'Role', value: (n) => n.role },
      { key: 'leads', label: 'Leads', num: true, value: (n) => n.leads },
    ],
  });
  const partitions = dataTable({
    testid: 'cluster-partitions',
    rowKey: (p) => `${p.topic}/${p.partition}`,
    empty: 'No topic.',
    columns: [
      { key: 'topic', label: 'Topic', value: (p) => p.topic },
      { key: 'partition', label: 'Partition', num: true, value: (p) => p.partition },
      { key: 'leader', label: 'Leader', value: (p) => p.leader, render: (p) => (p.leader < 0 ? 'none' : `${p.leader} (${p.leader_address})`) },
      { key: 'epoch', label: 'Epoch', num: true, value: (p) => p.leader_epoch },
      { key: 'replicas', label: 'Replicas', value: (p) => ids(p.replicas) },
      { key: 'isr', label: 'ISR', value: (p) => ids(p.isr) },
      { key: 'state', label: 'State', value: (p) => ['no leader', 'under-replicated', 'ok'][rank(p)] },
    ],
  });
  const clusterPart = h('div', { hidden: true }, h('h2', {}, 'Nodes'), nodes.el, h('h2', {}, 'Partitions'), partitions.el);
  root.append(h('h1', {}, 'Cluster'), h('div', { class: 'cards' }, mode.el, node.el, health.el, controller.el, under.el), note, clusterPart);
  mode.set('single node');
  node.set(location.host);
  text(note, 'This broker runs as a single node: every topic, group and transaction lives here.');
  return {
    async refresh() {
      // /healthz needs no token and answers text: "ok", or 503 with the store's reason.
      const res = await fetch('/healthz', { cache: 'no-store' });
      const body = (await res.text()).trim();
      health.set(res.ok ? 'healthy' : `unhealthy: ${body}`);
      const m = await getCluster();
      if (!m || !m.cluster) return;
      mode.set(`cluster ${m.cluster_name}`);
      node.set(`node ${m.node_id}`);
      controller.el.hidden = false;
      under.el.hidden = false;
      clusterPart.hidden = false;
      controller.set(m.controller < 0 ? 'none' : `node ${m.controller}`);
      text(note, 'Every node answers the console for the whole cluster: lists of dead letters, transactions, groups and topics are asked of each partition\'s leader, and a banner names what did not answer.');
      const rows = [];
      const leads = new Map();
      for (const t of m.topics || []) {
        for (const p of t.partition_info || []) {
          rows.push({ topic: t.name, ...p });
          if (p.leader >= 0) leads.set(p.leader, (leads.get(p.leader) || 0) + 1);
        }
      }
      rows.sort((a, b) => rank(a) - rank(b) || a.topic.localeCompare(b.topic) || a.partition - b.partition);
      under.set(String(rows.filter((p) => rank(p) < 2).length));
      nodes.update((m.nodes || []).map((n) => ({
        id: n.id,
        address: n.address,
        role: [n.id === m.controller ? 'controller' : '', n.id === m.node_id ? 'this node' : ''].filter(Boolean).join(', ') || '-',
        leads: leads.get(n.id) || 0,
      })));
      partitions.update(rows);
    },
  };
}
