// Shared widgets: labelled fields, error boxes, tables, badges, capacity bars, toasts.
import { h, fill, nextId } from './dom.js';
import { ApiError } from './api.js';
import { humanize } from './format.js';

// A labelled form field. input gets an id if it has none so <label for> works.
export function field(label, input, hint) {
  if (!input.id) input.id = nextId('f');
  const hintEl = hint ? h('small', { class: 'hint', id: `${input.id}-hint` }, hint) : null;
  if (hintEl) input.setAttribute('aria-describedby', hintEl.id);
  const isCheck = input.type === 'checkbox';
  return isCheck
    ? h('div', { class: 'field check' }, input, h('label', { for: input.id }, label), hintEl)
    : h('div', { class: 'field' }, h('label', { for: input.id }, label), input, hintEl);
}

export const input = (attrs) => h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false', ...attrs });

export function select(attrs, options) {
  return h('select', attrs, options.map((o) => (typeof o === 'string'
    ? h('option', { value: o }, o)
    : h('option', { value: o.value, selected: o.selected }, o.label))));
}

// role=alert box that shows a form's error (client check or API message).
export function errorBox(testid) {
  return h('div', { class: 'error', role: 'alert', 'data-testid': testid, hidden: true });
}

export function showError(box, msg) {
  fill(box, humanize(msg));
  box.hidden = !msg;
}

// Run an async form action: disables the submit button, shows a client-side error
// (check() returns a message) or the API's error.message, and reports success. run(extra)
// gets {} or {force: true} (after the force question); fail(e, askForce) may handle an error
// itself (askForce: null, or a function showing the force question).
export function onSubmit(form, box, { check, run, done, fail }) {
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    showError(box, '');
    const problem = check ? check() : null;
    if (problem) { showError(box, problem); return; }
    const btn = form.querySelector('button[type=submit]');
    if (btn) btn.disabled = true;
    try {
      const res = await run({});
      if (done) await done(res);
    } catch (e) {
      const again = async () => { const res = await run({ force: true }); if (done) await done(res); };
      if (fail && fail(e, needsForce(e) ? () => forceConfirm(box, e, again) : null)) return;
      if (needsForce(e)) forceConfirm(box, e, again);
      else showError(box, e instanceof ApiError ? e.message : `unexpected error: ${e.message}`);
    } finally {
      if (btn) btn.disabled = false;
    }
  });
}

// 409 {"error", "found": [{path, what}], "force_required": true}: the disks hold data.
const needsForce = (e) => e instanceof ApiError && e.status === 409 && !!(e.data && e.data.force_required);

// Shows what the API found on the disks and asks before sending the request again with
// "force": true; the answer to that request (success or error) replaces the question.
export function forceConfirm(box, e, again) {
  const found = Array.isArray(e.data.found) ? e.data.found : [];
  const yes = h('button', { type: 'button', class: 'btn danger', 'data-testid': 'force-confirm' }, 'Overwrite and continue');
  const no = h('button', { type: 'button', class: 'btn', 'data-testid': 'force-cancel' }, 'Cancel');
  fill(box, h('div', { class: 'stack', 'data-testid': 'force-question' },
    h('strong', {}, humanize(e.message)),
    found.length ? h('ul', { class: 'found', 'data-testid': 'force-found' }, found.map((f) => h('li', {},
      h('span', { class: 'mono' }, String(f.path ?? '')), ': ', humanize(String(f.what ?? 'existing data'))))) : null,
    h('span', {}, 'Continuing destroys what is there. This cannot be undone.'),
    h('div', { class: 'actions' }, yes, no)));
  box.hidden = false;
  no.addEventListener('click', () => showError(box, ''));
  yes.addEventListener('click', async () => {
    yes.disabled = no.disabled = true;
    try {
      showError(box, '');
      await again();
    } catch (e2) {
      showError(box, e2 instanceof ApiError ? e2.message : `unexpected error: ${e2.message}`);
    }
  });
  yes.focus();
}

// Data table. columns: [{label, cell: row => node|string, class}]
export function table(columns, rows, { testid, empty = 'nothing here yet', rowId } = {}) {
  return h('table', { class: 'data', 'data-testid': testid },
    h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col', class: c.class }, c.label)))),
    h('tbody', {}, rows.length
      ? rows.map((r) => h('tr', { 'data-testid': rowId ? rowId(r) : undefined },
        columns.map((c) => h('td', { class: c.class, 'data-label': c.label }, c.cell(r)))))
      : h('tr', {}, h('td', { colspan: columns.length, class: 'empty' }, empty))));
}

const STATE_CLASS = { ONLINE: 'ok', DEGRADED: 'warn', FAULTED: 'bad', UNAVAILABLE: 'bad', OFFLINE: 'warn', RESILVERING: 'warn', MISSING: 'bad' };
export function stateBadge(state) {
  return h('span', { class: `badge ${STATE_CLASS[state] || 'muted'}`, 'data-testid': 'state' }, state || 'unknown');
}

export function badge(text, kind = 'muted', attrs = {}) {
  return h('span', { class: `badge ${kind}`, ...attrs }, text);
}

// Horizontal bar: used (dark) inside allocated (light) out of total.
export function capacityBar(used, allocated, total, label) {
  const p = (v) => (total > 0 ? Math.min(100, (100 * v) / total) : 0);
  const pu = p(used), pa = Math.max(p(allocated), pu);
  return h('div', { class: 'capbar', role: 'meter', 'aria-valuemin': 0, 'aria-valuemax': 100,
    'aria-valuenow': pa.toFixed(0), 'aria-label': label || 'capacity' },
  h('div', { class: 'capbar-alloc', style: `width:${pa.toFixed(1)}%` }),
  h('div', { class: 'capbar-used', style: `width:${pu.toFixed(1)}%` }));
}

export function progressBar(fraction, testid) {
  const p = Math.max(0, Math.min(1, fraction || 0)) * 100;
  return h('div', { class: 'progress-row' },
    h('div', { class: 'progress', role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': 100,
      'aria-valuenow': p.toFixed(0), 'aria-label': 'progress', 'data-testid': testid },
    h('div', { class: 'progress-fill', style: `width:${p.toFixed(1)}%` })),
    h('span', { class: 'progress-label' }, `${p.toFixed(0)} %`));
}

// Transient notices for row actions (delete, enable...). Errors stay until closed.
export function toast(msg, kind = 'info') {
  const area = document.getElementById('toasts');
  const t = h('div', { class: `toast ${kind}`, role: kind === 'error' ? 'alert' : 'status', 'data-testid': `toast-${kind}` },
    h('span', {}, humanize(msg)), h('button', { type: 'button', class: 'link', 'aria-label': 'dismiss', onclick: () => t.remove() }, '×'));
  area.append(t);
  if (kind !== 'error') setTimeout(() => t.remove(), 4000);
}

// Row action: confirm (optional), run, toast the API's message on failure, then refresh.
export async function action(run, { confirmText, ok, refresh } = {}) {
  if (confirmText && !window.confirm(confirmText)) return;
  try {
    await run();
    if (ok) toast(ok, 'ok');
  } catch (e) {
    toast(e instanceof ApiError ? e.message : `unexpected error: ${e.message}`, 'error');
  }
  if (refresh) await refresh();
}

export function section(title, ...body) {
  return h('section', { class: 'card' }, h('h2', {}, title), ...body);
}

export function button(label, attrs = {}) {
  return h('button', { type: 'button', class: 'btn', ...attrs }, label);
}

// Edit panel shown under a list: a highlighted card holding an edit form; replaces any
// previous one. Returns a close function (empty the box).
export function editPanel(box, title, form, testid) {
  const close = () => fill(box);
  fill(box, h('section', { class: 'card edit-card', 'data-testid': testid }, h('h2', {}, title), form));
  box.scrollIntoView({ block: 'nearest' });
  const first = form.querySelector('input:not([type=checkbox]), textarea, select');
  if (first) first.focus();
  return close;
}

// A list could not be loaded. While nasd is only unreachable the last data stays (the banner
// says it is old); any other failure, or nothing shown yet, shows the error in the box.
export function loadFailed(box, e, what) {
  if (e instanceof ApiError && e.unreachable && box.firstChild && !box.querySelector('.load-error')) return;
  fill(box, h('div', { class: 'error load-error', role: 'alert', 'data-testid': 'load-error' }, `cannot ${what}: ${humanize(e.message)}`));
}
