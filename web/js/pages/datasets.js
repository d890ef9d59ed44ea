// Datasets: directory trees in a pool with a quota and a root directory owner/mode;
// create (with lz4 compression or not), edit (quota, owner, mode, comment), delete.
import { h, fill } from '../dom.js';
import { get, post, patch, del, key } from '../api.js';
import * as fmt from '../format.js';
import * as v from '../validate.js';
import { withSpace, fillPoolSelect } from '../space.js';
import { field, input, select, errorBox, onSubmit, table, action, section, button, showError, editPanel, toast, loadFailed } from '../ui.js';

// Warning (not an error: datasets are thin) when a quota is more than the pool can give.
export function quotaWarning(quotaText, pool) {
  const q = quotaValue(quotaText) === 0 ? 0 : v.parseSize(quotaText);
  if (!q || !pool) return null;
  if (q > pool.size) return `quota ${fmt.bytes(q)} is more than pool ${pool.name} holds (${fmt.bytes(pool.size)}): writes will stop at the pool's free space, not at the quota`;
  if (pool.unreserved !== undefined && q > pool.unreserved) return `quota ${fmt.bytes(q)} is more than pool ${pool.name} has unreserved (${fmt.bytes(pool.unreserved)})`;
  return null;
}

// quota "" / "0" / "none" means no quota
const quotaValue = (s) => (!s || s === '0' || s.toLowerCase() === 'none' ? 0 : s);
const quotaCheck = (s) => (quotaValue(s) === 0 ? null : v.size(s, 'quota'));
const ID_MAX = 4294967294;
// Optional owner fields: empty = leave as is.
const ownerCheck = (mode, uid, gid) => (mode ? v.mode(mode) : null)
  || (uid !== '' ? v.intRange(uid, 0, ID_MAX, 'owner UID') : null)
  || (gid !== '' ? v.intRange(gid, 0, ID_MAX, 'group GID') : null);
// Compact quota text for an input ("20G"), from bytes.
const quotaText = (n) => (n ? fmt.bytes(n).replace(/ (.)iB$/, '$1').replace(/ B$/, '') : '');

function ownerFields(prefix, d) {
  return {
    mode: input({ id: `${prefix}-mode`, name: 'mode', placeholder: d ? '' : '0755', value: d ? d.mode || '' : '', maxlength: 4, inputmode: 'numeric' }),
    uid: input({ id: `${prefix}-uid`, name: 'uid', placeholder: d ? '' : '0', value: d && d.uid !== undefined ? String(d.uid) : '', inputmode: 'numeric' }),
    gid: input({ id: `${prefix}-gid`, name: 'gid', placeholder: d ? '' : '0', value: d && d.gid !== undefined ? String(d.gid) : '', inputmode: 'numeric' }),
  };
}

function editForm(d, close, refresh, poolOf) {
  const quota = input({ id: 'ds-edit-quota', name: 'quota', value: quotaText(d.quota), placeholder: 'none' });
  const comment = input({ id: 'ds-edit-comment', name: 'comment', value: d.comment || '' });
  const o = ownerFields('ds-edit', d);
  const err = errorBox('dataset-edit-form-error');
  const quotaWarn = h('div', { class: 'notice in-card', role: 'status', 'data-testid': 'quota-warning-edit', hidden: true });
  quota.addEventListener('input', () => {
    const w = quotaWarning(quota.value.trim(), poolOf());
    fill(quotaWarn, w || '');
    quotaWarn.hidden = !w;
  });
  const form = h('form', { class: 'grid', id: 'dataset-edit-form', 'aria-label': `Edit dataset ${d.full_name}`, novalidate: true },
    field('Quota', quota, 'e.g. 10G; empty or 0 = no quota'),
    field('Mode', o.mode, 'octal permissions of the root directory'), field('Owner UID', o.uid), field('Group GID', o.gid),
    h('div', { class: 'span2' }, field('Comment', comment)),
    h('div', { class: 'full' }, quotaWarn),
    h('div', { class: 'actions full' }, h('button', { type: 'submit', id: 'dataset-save' }, 'Save changes'),
      button('Cancel', { id: 'dataset-edit-cancel', onclick: close })),
    h('div', { class: 'full' }, err));
  onSubmit(form, err, {
    check: () => quotaCheck(quota.value.trim()) || ownerCheck(o.mode.value.trim(), o.uid.value.trim(), o.gid.value.trim()),
    run: () => {
      const body = {};
      if (quota.value.trim() !== quotaText(d.quota)) body.quota = quotaValue(quota.value.trim()); // untouched text = unchanged
      if (comment.value !== (d.comment || '')) body.comment = comment.value;
      if (o.mode.value.trim() && parseInt(o.mode.value.trim(), 8) !== parseInt(d.mode || '-1', 8)) body.mode = o.mode.value.trim().padStart(4, '0');
      if (o.uid.value.trim() !== '' && Number(o.uid.value) !== d.uid) body.uid = Number(o.uid.value);
      if (o.gid.value.trim() !== '' && Number(o.gid.value) !== d.gid) body.gid = Number(o.gid.value);
      return Object.keys(body).length ? patch(`datasets/${key(d.pool, d.name)}`, body) : null;
    },
    done: async (res) => { close(); if (res) toast(`dataset ${d.full_name} updated`, 'ok'); await refresh(); },
  });
  return form;
}

export async function mount(root) {
  let pools = [];
  const listBox = h('div', { id: 'datasets-list' });
  const editBox = h('div', { id: 'dataset-edit' });
  const openEdit = (d) => {
    const close = () => fill(editBox);
    editPanel(editBox, `Edit dataset ${d.full_name}`, editForm(d, close, refresh, () => pools.find((p) => p.name === d.pool)), 'dataset-edit-panel');
  };
  async function refresh() {
    const [dsets, ps, vols] = await Promise.allSettled([get('datasets'), get('pools'), get('volumes')]);
    if (ps.status === 'fulfilled') { pools = withSpace(ps.value, vols.value, dsets.value); fillPoolSelect(pool, pools); warn(); }
    else if (!pool.options.length || !ps.reason.unreachable) fillPoolSelect(pool, [], ps.reason.message);
    try {
      if (dsets.status === 'rejected') throw dsets.reason;
      const rows = dsets.value;
      fill(listBox, table([
        { label: 'Dataset', cell: (d) => h('div', {}, h('strong', {}, d.full_name), h('span', { class: 'sub mono' }, d.path)) },
        { label: 'Quota', class: 'num', cell: (d) => {
          const p = pools.find((x) => x.name === d.pool);
          const over = d.quota && p && d.quota > p.size;
          return h('span', {}, d.quota ? fmt.bytes(d.quota) : 'none', over ? h('span', { class: 'badge warn quota-over',
            'data-testid': 'quota-over', title: `more than pool ${p.name} holds (${fmt.bytes(p.size)})` }, '> pool') : null);
        } },
        { label: 'Used', class: 'num', cell: (d) => fmt.bytes(d.used) },
        { label: 'Available', class: 'num', cell: (d) => (d.available === undefined ? '—' : fmt.bytes(d.available)) },
        { label: 'In pool', class: 'num', cell: (d) => h('span', { title: 'pool space mapped for the dataset, filesystem metadata included (lz4 saves below this, on the member disks)' }, fmt.bytes(d.allocated || 0)) },
        { label: 'Compression', cell: (d) => d.compression },
        { label: 'Owner', cell: (d) => h('span', { class: 'mono', 'data-testid': 'owner' },
          d.mode ? `${d.uid}:${d.gid} ${d.mode}` : '—') },
        { label: 'NFS exports', class: 'num', cell: (d) => d.exports },
        { label: 'Actions', cell: (d) => h('div', { class: 'actions' },
          button('Edit', { class: 'btn small', 'data-testid': `dataset-edit-${d.full_name}`, onclick: () => openEdit(d) }),
          button('Delete', { class: 'btn small danger', 'data-testid': `dataset-delete-${d.full_name}`,
            onclick: () => action(() => del(`datasets/${key(d.pool, d.name)}?force=true`), { confirmText: `Delete dataset ${d.full_name}, all its files and its snapshots?`, ok: `dataset ${d.full_name} deleted`, refresh }) })) },
      ], rows, { testid: 'datasets-table', rowId: (d) => `dataset-row-${d.full_name}`, empty: 'No datasets yet.' }));
    } catch (e) {
      loadFailed(listBox, e, 'list datasets');
    }
  }

  const pool = select({ id: 'ds-pool', name: 'pool' }, []);
  const name = input({ id: 'ds-name', name: 'name', placeholder: 'share', maxlength: 62 });
  const quota = input({ id: 'ds-quota', name: 'quota', placeholder: 'none' });
  const comp = select({ id: 'ds-compression', name: 'compression' }, ['off', 'lz4']);
  const comment = input({ id: 'ds-comment', name: 'comment', placeholder: 'optional' });
  const o = ownerFields('ds');
  const err = errorBox('dataset-form-error');
  const quotaWarn = h('div', { class: 'notice in-card', role: 'status', 'data-testid': 'quota-warning', hidden: true });
  const warn = () => {
    const w = quotaWarning(quota.value.trim(), pools.find((p) => p.name === pool.value));
    fill(quotaWarn, w || '');
    quotaWarn.hidden = !w;
  };
  quota.addEventListener('input', warn);
  pool.addEventListener('change', warn);
  const form = h('form', { class: 'grid', id: 'dataset-form', 'aria-label': 'Create dataset', novalidate: true },
    field('Pool', pool), field('Name', name, 'letters, digits, _ . : -'), field('Quota', quota, 'e.g. 10G; empty = no quota'),
    field('Compression', comp, 'lz4 is chosen at creation'), field('Comment', comment),
    field('Mode', o.mode, 'optional, octal, e.g. 0775'), field('Owner UID', o.uid, 'optional'), field('Group GID', o.gid, 'optional'),
    h('div', { class: 'full' }, quotaWarn),
    h('div', { class: 'actions full' }, h('button', { type: 'submit', id: 'dataset-create' }, 'Create dataset')),
    h('div', { class: 'full' }, err));
  onSubmit(form, err, {
    check: () => (!pool.value ? 'create a pool first' : null) || v.name(name.value.trim(), 'dataset name') || quotaCheck(quota.value.trim())
      || ownerCheck(o.mode.value.trim(), o.uid.value.trim(), o.gid.value.trim()),
    run: () => {
      const body = { pool: pool.value, name: name.value.trim(), quota: quotaValue(quota.value.trim()),
        compression: comp.value, comment: comment.value };
      if (o.mode.value.trim()) body.mode = o.mode.value.trim().padStart(4, '0');
      if (o.uid.value.trim() !== '') body.uid = Number(o.uid.value);
      if (o.gid.value.trim() !== '') body.gid = Number(o.gid.value);
      return post('datasets', body);
    },
    done: async (d) => {
      toast(`dataset ${d && d.full_name ? d.full_name : `${pool.value}/${name.value.trim()}`} created`, 'ok');
      for (const el of [name, quota, comment, o.mode, o.uid, o.gid]) el.value = '';
      warn();
      showError(err, '');
      await refresh();
    },
  });
  fill(root, h('h1', {}, 'Datasets'), section('Datasets', listBox), editBox, section('Create dataset', form));
  await refresh();
}
