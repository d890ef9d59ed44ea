// The API token form: a modal dialog shown when nasd answers 401. Every request waiting for
// a token shares one display of the form; the token is kept in localStorage until "Forget token".
import { h } from './dom.js';

const TOKEN_KEY = 'nasd-token';
let pending = null; // promise of the open form, shared by all callers
let dialog = null;
let declined = false; // cancelled: do not pop up again by itself, only from "Enter token"

function build() {
  const input = h('input', { type: 'password', id: 'token-input', name: 'token', autocomplete: 'off', spellcheck: 'false',
    required: true, 'aria-describedby': 'token-help' });
  const msg = h('p', { class: 'token-msg', id: 'token-msg', role: 'alert', 'data-testid': 'token-msg' });
  const cancel = h('button', { type: 'button', class: 'btn', id: 'token-cancel', value: 'cancel' }, 'Cancel');
  const form = h('form', { method: 'dialog', id: 'token-form', class: 'stack' },
    h('h2', {}, 'API token'),
    msg,
    h('div', { class: 'field' }, h('label', { for: 'token-input' }, 'Token'), input,
      h('small', { class: 'hint', id: 'token-help' }, 'Create one on the nasd host with: nasd --create-token NAME')),
    h('div', { class: 'actions' }, h('button', { type: 'submit', id: 'token-submit', value: 'ok' }, 'Use token'), cancel));
  dialog = h('dialog', { class: 'token-dialog', 'data-testid': 'token-form', 'data-shown': '0', 'aria-labelledby': 'token-title' }, form);
  form.querySelector('h2').id = 'token-title';
  cancel.addEventListener('click', () => dialog.close('cancel'));
  dialog.addEventListener('cancel', () => { dialog.returnValue = 'cancel'; }); // Escape
  document.body.append(dialog);
  return dialog;
}

// Resolves true when a token was entered, false when the form was cancelled.
export function askToken({ wrong = false, force = false } = {}) {
  if (pending) return pending;
  if (declined && !force) return Promise.resolve(false);
  const d = dialog || build();
  const input = d.querySelector('#token-input');
  d.querySelector('#token-msg').textContent = wrong
    ? 'nasd refused this token (wrong or revoked). Enter a valid API token.'
    : 'This nasd requires an API token.';
  d.querySelector('#token-msg').className = `token-msg ${wrong ? 'error' : 'muted'}`;
  d.dataset.reason = wrong ? 'wrong' : 'missing';
  d.dataset.shown = String(Number(d.dataset.shown) + 1);
  input.value = '';
  pending = new Promise((resolve) => {
    d.addEventListener('close', () => {
      const t = input.value.trim();
      const okay = d.returnValue !== 'cancel' && !!t;
      if (okay) localStorage.setItem(TOKEN_KEY, t);
      else localStorage.removeItem(TOKEN_KEY);
      declined = !okay;
      pending = null;
      resolve(okay);
      window.dispatchEvent(new Event('nasd-token'));
    }, { once: true });
  });
  d.returnValue = '';
  d.showModal();
  input.focus();
  return pending;
}

export const hasToken = () => !!localStorage.getItem(TOKEN_KEY);
export function forgetToken() {
  localStorage.removeItem(TOKEN_KEY);
  window.dispatchEvent(new Event('nasd-token'));
}
