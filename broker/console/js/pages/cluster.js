// The cluster view. Until cluster mode (DESIGN §8) exists the broker runs alone: the page says
// "single node" and shows the broker's health (/healthz).

import { h, card, text } from '../dom.js';

export const title = 'Cluster';

export function mount(root) {
  const mode = card('Mode', 'cluster-mode');
  const node = card('This node', 'cluster-node');
  const health = card('Health', 'cluster-health');
  const note = h('p', { class: 'muted' });
  root.append(h('h1', {}, 'Cluster'), h('div', { class: 'cards' }, mode.el, node.el, health.el), note);
  mode.set('single node');
  node.set(location.host);
  text(note, 'This broker runs as a single node: every topic, group and transaction lives here. The cluster view lists nodes and partition leaders once cluster mode is on.');
  return {
    async refresh() {
      // /healthz needs no token and answers text: "ok", or 503 with the store's reason.
      const res = await fetch('/healthz', { cache: 'no-store' });
      const body = (await res.text()).trim();
      health.set(res.ok ? 'healthy' : `unhealthy: ${body}`);
    },
  };
}
