// Datasets: directory trees in a pool with a quota; create, edit quota, delete.
import { h, fill } from '../dom.js';
import { get, post, patch, del, key } from '../api.js';
import * as fmt from '../format.js';
import * as v from '../validate.js';
import { field, input, select, errorBox, onSubmit, table, action, section, button, showError } from '../ui.js';

export const poolOptions = (pools) => (pools.length
  ? pools.map((p) => ({ value: p.name, label: `${p.name} (${fmt.bytes(p.free)} free)` }))
  : [{ value: '', label: 'no pools — create one first' }]);

// quota "" / "0" / "none" means no quota
const quotaValue = (s) => (!s || s === '0' || s.toLowerCase() === 'none' ? 0 : s);
const quotaCheck = (s) => (quotaValue(s) === 0 ? null : v.size(s, 'quota'));

function quotaEditor(d, refresh) {
  const cell = h('div', { class: 'actions' });
  const show = () => fill(cell, button('Edit quota', { class: 'btn small', 'data-testid': `dataset-quota-edit-${d.full_name}`, onclick: edit }));
  function edit() {
    const q = input({ value: d.quota ? fmt.bytes(d.quota).replace(/ (.)iB$/, '$1').replace(/ B$/, '') : '', placeholder: 'e.g. 20G or 0',
      'aria-label': `new quota for ${d.full_name}`, size: 8, 'data-testid': 'dataset-quota-input' });
    const err = h('span', { class: 'sub', role: 'alert' });
    const form = h('form', { class: 'actions' }, q, h('button', { type: 'submit', class: 'btn small' }, 'Save'),
      button('Cancel', { class: 'btn small', onclick: show }), err);
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const problem = quotaCheck(q.value.trim());
      if (problem) { fill(err, problem); return; }
      await action(() => patch(`datasets/${key(d.pool, d.name)}`, { quota: quotaValue(q.value.trim()) }),
        { ok: `quota of ${d.full_name} updated`, refresh });
    });
    fill(cell, form);
    q.focus();
  }
  show();
  return cell;
}

export async function mount(root) {
  const pools = await get('pools').catch(() => []);
  const listBox = h('div', { id: 'datasets-list' });
  const refresh = async () => {
    try {
      const rows = await get('datasets');
      fill(listBox, table([
        { label: 'Dataset', cell: (d) => h('div', {}, h('strong', {}, d.full_name), h('span', { class: 'sub mono' }, d.path)) },
        { label: 'Quota', class: 'num', cell: (d) => (d.quota ? fmt.bytes(d.quota) : 'none') },
        { label: 'Used', class: 'num', cell: (d) => fmt.bytes(d.used) },
        { label: 'Compression', cell: (d) => d.compression },
        { label: 'NFS exports', class: 'num', cell: (d) => d.exports },
        { label: 'Actions', cell: (d) => h('div', { class: 'actions' }, quotaEditor(d, refresh),
          button('Delete', { class: 'btn small danger', 'data-testid': `dataset-delete-${d.full_name}`,
            onclick: () => action(() => del(`datasets/${key(d.pool, d.name)}`), { confirmText: `Delete dataset ${d.full_name} and all its files?`, ok: `dataset ${d.full_name} deleted`, refresh }) })) },
      ], rows, { testid: 'datasets-table', rowId: (d) => `dataset-row-${d.full_name}`, empty: 'No datasets yet.' }));
    } catch (e) {
      fill(listBox, h('div', { class: 'error', role: 'alert' }, `cannot list datasets: ${e.message}`));
    }
  };

  const pool = select({ id: 'ds-pool', name: 'pool' }, poolOptions(pools));
  const name = input({ id: 'ds-name', name: 'name', placeholder: 'share', maxlength: 64 });
  const quota = input({ id: 'ds-quota', name: 'quota', placeholder: 'none' });
  const comp = select({ id: 'ds-compression', name: 'compression' }, ['off', 'lz4']);
  const comment = input({ id: 'ds-comment', name: 'comment', placeholder: 'optional' });
  const err = errorBox('dataset-form-error');
  const form = h('form', { class: 'grid', id: 'dataset-form', 'aria-label': 'Create dataset', novalidate: true },
    field('Pool', pool), field('Name', name, 'letters, digits, _ . : -'), field('Quota', quota, 'e.g. 10G; empty = no quota'),
    field('Compression', comp), field('Comment', comment),
    h('div', { class: 'actions full' }, h('button', { type: 'submit', id: 'dataset-create' }, 'Create dataset')),
    h('div', { class: 'full' }, err));
  onSubmit(form, err, {
    check: () => (!pool.value ? 'create a pool first' : null) || v.name(name.value.trim(), 'dataset name') || quotaCheck(quota.value.trim()),
    run: () => post('datasets', { pool: pool.value, name: name.value.trim(), quota: quotaValue(quota.value.trim()),
      compression: comp.value, comment: comment.value }),
    done: async () => { name.value = ''; quota.value = ''; comment.value = ''; showError(err, ''); await refresh(); },
  });
  fill(root, h('h1', {}, 'Datasets'), section('Datasets', listBox), section('Create dataset', form));
  await refresh();
}
