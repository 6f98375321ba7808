// DOM helpers. Every string from the API reaches the page as a text node or an attribute
// value set through the DOM, never parsed as markup anywhere in the console.

// h('td', {class: 'num', 'data-col': 'lag'}, '12'): an element with attributes and children.
// Children may be nodes, strings/numbers (text nodes), arrays of those, or null (skipped).
// Attributes starting with "on" take a function (addEventListener; the CSP forbids inline
// handlers); `hidden`/`disabled` take a boolean.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') {
      el.addEventListener(name.slice(2), value);
    } else if (value === true) {
      el.setAttribute(name, '');
    } else {
      el.setAttribute(name, String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function text(el, value) {
  el.textContent = value === null || value === undefined ? '' : String(value);
  return el;
}

// A table kept up to date by update(rows). A row is rebuilt only when one of its cells'
// values changed, so focus and hover survive the refreshes.
//   columns: [{key, label, num?, cls?, live?, value(row) -> raw, render?(row) -> node|string}]
//   A `live` column (an age) changes at every refresh: it is updated in place and does not
//   count as a change of its row, so the row's buttons stay put under the pointer.
//   rowKey(row) -> string: the row's identity (data-key attribute)
export function dataTable({ columns, rowKey, empty = 'Nothing here.', testid, onRow }) {
  const thead = h('thead', {}, h('tr', {}, columns.map((c) =>
    h('th', { class: c.num ? 'num' : null, scope: 'col' }, c.label))));
  const tbody = h('tbody');
  const table = h('table', { 'data-testid': testid }, thead, tbody);
  const wrap = h('div', { class: 'table-wrap' }, table);
  let rendered = new Map();

  function cell(c, row) {
    const raw = c.value(row);
    const content = c.render ? c.render(row) : raw;
    const cls = [c.num ? 'num' : '', c.cls || ''].join(' ').trim() || null;
    // data-label: the phone layout shows each row as a card, every cell after its label.
    return h('td', { class: cls, 'data-col': c.key, 'data-value': raw, 'data-label': c.label }, content);
  }

  function update(rows) {
    const next = new Map();
    const nodes = [];
    for (const row of rows) {
      const key = String(rowKey(row));
      const sig = JSON.stringify(columns.map((c) => (c.live ? null : c.value(row))));
      let tr = rendered.get(key);
      if (!tr || tr.dataset.sig !== sig) {
        tr = h('tr', { 'data-key': key }, columns.map((c) => cell(c, row)));
        tr.dataset.sig = sig;
        if (onRow) onRow(tr, row);
      } else {
        columns.forEach((c, i) => {
          if (c.live) tr.children[i].replaceWith(cell(c, row));
        });
      }
      next.set(key, tr);
      nodes.push(tr);
    }
    if (nodes.length === 0) {
      nodes.push(h('tr', { class: 'empty-row' },
        h('td', { class: 'empty', colspan: columns.length }, empty)));
    }
    // replaceChildren moves kept rows instead of recreating them.
    tbody.replaceChildren(...nodes);
    rendered = next;
  }

  return { el: wrap, table, update };
}

// A labelled figure: h('div.card') with a label and a value, its value settable later.
export function card(label, testid) {
  const value = h('div', { class: 'value', 'data-testid': testid }, '–');
  const el = h('div', { class: 'card' }, h('div', { class: 'label' }, label), value);
  return { el, set: (v) => text(value, v) };
}

export function pill(value) {
  const v = String(value || '').toLowerCase();
  return h('span', { class: `pill ${v.replace(/[^a-z_]/g, '')}` }, v || '-');
}

export function button(label, onclick, attrs = {}) {
  return h('button', { type: 'button', ...attrs, onclick }, label);
}

export function link(label, href, attrs = {}) {
  return h('a', { href, ...attrs }, label);
}
