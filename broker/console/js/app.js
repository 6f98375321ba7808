// The console's shell: hash routing (#/page/arg?query), the refresh loop (every 2 s, paused
// while a dialog is open, the tab is hidden or the operator pressed Pause), the error banner
// and the token prompt. Each page module exports mount(root, route, ctx) -> {refresh()}.

import { onTokenPrompt, onTokenChange, onPartialView, token, forgetToken } from './api.js';
import { askToken, confirmAction, isOpen, toast } from './dialogs.js';
import { h, text } from './dom.js';
import * as topics from './pages/topics.js';
import * as groups from './pages/groups.js';
import * as transactions from './pages/transactions.js';
import * as deadLetters from './pages/dead_letters.js';
import * as webhooks from './pages/webhooks.js';
import * as connections from './pages/connections.js';
import * as cluster from './pages/cluster.js';

const PAGES = {
  topics,
  groups,
  transactions,
  'dead-letters': deadLetters,
  webhooks,
  connections,
  cluster,
};
const REFRESH_MS = 2000;

const main = document.getElementById('main');
const stateEl = document.getElementById('refresh-state');
const pauseBtn = document.getElementById('pause');
const forgetBtn = document.getElementById('forget-token');
const banner = h('div', { class: 'banner', role: 'alert', 'data-testid': 'error-banner', hidden: true });
// Cluster mode: what the last refresh's answers left out (a leader down, a node that did not
// answer). Kept apart from the error banner: the page still shows what did answer.
const partial = h('div', { class: 'banner partial', role: 'status', 'data-testid': 'partial-banner', hidden: true });
let partialNotes = [];

let current = null;  // {name, routeKey, page}
let running = false;
let userPaused = false;
let timer = null;
let refreshes = 0;
let firstRenderDone = false;

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  const q = raw.indexOf('?');
  const pathPart = q < 0 ? raw : raw.slice(0, q);
  const segs = pathPart.split('/').filter(Boolean).map((s) => {
    try {
      return decodeURIComponent(s);
    } catch {
      return s;
    }
  });
  const name = PAGES[segs[0]] ? segs[0] : 'topics';
  return { name, args: PAGES[segs[0]] ? segs.slice(1) : [], params: new URLSearchParams(q < 0 ? '' : raw.slice(q + 1)) };
}

export function navigate(hash) {
  if (location.hash === hash) {
    mount();
  } else {
    location.hash = hash;
  }
}

function setState(s) {
  text(stateEl, s);
}

function showError(err) {
  banner.hidden = false;
  const code = err && err.code ? `${err.code}: ` : '';
  text(banner, `${code}${err && err.message ? err.message : String(err)}`);
}

function notePartial(path, cluster) {
  const parts = [];
  for (const m of cluster.missing || []) parts.push(`${m.topic}/${m.partition}: ${m.reason}`);
  for (const n of cluster.nodes || []) {
    if (!n.answered) parts.push(`node ${n.node} (${n.address}) did not answer: ${n.error || 'no reason given'}`);
  }
  partialNotes.push(`${path}: ${parts.join('; ') || 'incomplete'}`);
}

function showPartial() {
  partial.hidden = partialNotes.length === 0;
  text(partial, partialNotes.length ? `Partial view of the cluster — ${partialNotes.join(' | ')}` : '');
}

function schedule(ms = REFRESH_MS) {
  clearTimeout(timer);
  timer = setTimeout(tick, ms);
}

async function tick() {
  if (!current) return;
  if (running) {
    schedule();
    return;
  }
  if (userPaused || isOpen() || document.hidden) {
    setState(userPaused ? 'paused' : 'waiting');
    schedule();
    return;
  }
  await refreshNow();
  schedule();
}

// Runs the current page's refresh once (never two at a time).
async function refreshNow() {
  if (!current || running) return;
  const mine = current;
  running = true;
  setState('refreshing');
  partialNotes = [];
  try {
    await mine.page.refresh();
    if (mine !== current) return;
    banner.hidden = true;
    showPartial();
    refreshes += 1;
    document.body.dataset.refreshes = String(refreshes);
    setState(`updated ${new Date().toLocaleTimeString('en-GB')}`);
    if (!firstRenderDone) {
      // Read by the load-time figure (docs/BENCHMARKS.md): navigation start to the first
      // table rendered with data.
      firstRenderDone = true;
      performance.mark('txmq-first-render');
      document.documentElement.dataset.firstRenderMs = String(Math.round(performance.now()));
    }
  } catch (err) {
    if (mine === current) {
      showError(err);
      setState('error');
      document.body.dataset.errors = String(Number(document.body.dataset.errors || 0) + 1);
    }
  } finally {
    running = false;
  }
}

const ctx = {
  navigate,
  confirm: confirmAction,
  toast,
  // After an operator action: show its effect now rather than at the next tick.
  refresh: async () => {
    while (running) await new Promise((r) => setTimeout(r, 20));
    await refreshNow();
  },
};

function mount() {
  const route = parseHash();
  const routeKey = location.hash;
  if (current && current.routeKey === routeKey) return;
  if (current && current.page.unmount) current.page.unmount();
  for (const a of document.querySelectorAll('nav a')) {
    if (a.dataset.page === route.name) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const root = h('section', { 'data-page': route.name });
  main.replaceChildren(banner, partial, root);
  banner.hidden = true;
  partial.hidden = true;
  refreshes = 0;
  document.body.dataset.page = route.name;
  document.body.dataset.refreshes = '0';
  current = { name: route.name, routeKey, page: PAGES[route.name].mount(root, route, ctx) };
  document.title = `${PAGES[route.name].title} · txmq`;
  refreshNow().then(() => schedule());
}

function updateTokenButton() {
  forgetBtn.hidden = !token();
}

onTokenPrompt((reason) => askToken(reason));
onPartialView(notePartial);
onTokenChange(updateTokenButton);
updateTokenButton();

pauseBtn.addEventListener('click', () => {
  userPaused = !userPaused;
  pauseBtn.setAttribute('aria-pressed', String(userPaused));
  text(pauseBtn, userPaused ? 'Resume' : 'Pause');
  if (!userPaused) schedule(0);
  else setState('paused');
});
forgetBtn.addEventListener('click', () => {
  forgetToken();
  schedule(0);
});
const menu = document.getElementById('menu-toggle');
const nav = document.getElementById('nav');
menu.addEventListener('click', () => {
  const open = nav.classList.toggle('open');
  menu.setAttribute('aria-expanded', String(open));
});
nav.addEventListener('click', (e) => {
  if (e.target.closest('a')) {
    nav.classList.remove('open');
    menu.setAttribute('aria-expanded', 'false');
  }
});
document.addEventListener('visibilitychange', () => {
  if (!document.hidden) schedule(0);
});
window.addEventListener('hashchange', mount);
if (!location.hash) history.replaceState(null, '', '#/topics');
mount();
