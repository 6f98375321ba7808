// The two modal dialogs: a confirmation before an operator action (commit, rollback,
// redrive, replay) and the token prompt. While one is open the app pauses its refreshes
// (isOpen()), so the table under the dialog does not move.

import { h, text } from './dom.js';

const openDialogs = new Set();

export function isOpen() {
  return openDialogs.size > 0;
}

function show(dialog) {
  openDialogs.add(dialog);
  dialog.showModal();
}

function hide(dialog) {
  if (dialog.open) dialog.close();
  openDialogs.delete(dialog);
}

// confirm({title, text, ok, danger, extra}) -> Promise<boolean>. `extra` (a node) goes under
// the text, e.g. an input whose value the caller reads after true.
export function confirmAction({ title, message, ok = 'OK', danger = true, extra = null }) {
  const dialog = document.getElementById('confirm-dialog');
  const form = document.getElementById('confirm-form');
  const okBtn = document.getElementById('confirm-ok');
  const cancel = document.getElementById('confirm-cancel');
  text(document.getElementById('confirm-title'), title);
  text(document.getElementById('confirm-text'), message);
  document.getElementById('confirm-extra').replaceChildren(...(extra ? [extra] : []));
  text(okBtn, ok);
  okBtn.className = danger ? 'danger' : 'primary';
  return new Promise((resolve) => {
    const done = (answer) => {
      form.removeEventListener('submit', onSubmit);
      cancel.removeEventListener('click', onCancel);
      dialog.removeEventListener('cancel', onCancel);
      hide(dialog);
      resolve(answer);
    };
    const onSubmit = (e) => {
      e.preventDefault();
      done(true);
    };
    const onCancel = (e) => {
      e.preventDefault();
      done(false);
    };
    form.addEventListener('submit', onSubmit);
    cancel.addEventListener('click', onCancel);
    dialog.addEventListener('cancel', onCancel);
    show(dialog);
    cancel.focus();
  });
}

// The token prompt; resolves with the non-empty token typed. It cannot be dismissed: without a
// token the API answers nothing.
export function askToken(reason) {
  const dialog = document.getElementById('token-dialog');
  const form = document.getElementById('token-form');
  const input = document.getElementById('token-input');
  const error = document.getElementById('token-error');
  input.value = '';
  error.hidden = !reason;
  text(error, reason || '');
  return new Promise((resolve) => {
    const onSubmit = (e) => {
      e.preventDefault();
      const t = input.value.trim();
      if (!t) return;
      form.removeEventListener('submit', onSubmit);
      dialog.removeEventListener('cancel', onCancel);
      hide(dialog);
      resolve(t);
    };
    const onCancel = (e) => e.preventDefault();
    form.addEventListener('submit', onSubmit);
    dialog.addEventListener('cancel', onCancel);
    show(dialog);
    input.focus();
  });
}

export function toast(message, isError = false) {
  const el = document.getElementById('toast');
  text(el, message);
  el.className = isError ? 'error' : '';
  el.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => {
    el.hidden = true;
  }, isError ? 8000 : 4000);
}

export function field(label, input) {
  const id = `f-${Math.random().toString(36).slice(2)}`;
  input.id = id;
  return h('div', {}, h('label', { for: id }, label), input);
}
