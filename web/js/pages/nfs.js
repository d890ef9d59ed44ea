// NFS exports: a dataset exported to client networks, with read-only and squash options;
// create, edit (clients, access, squash, anonymous ids, enabled), enable/disable, delete.
import { h, fill } from '../dom.js';
import { get, post, patch, del, key } from '../api.js';
import * as v from '../validate.js';
import { field, input, select, errorBox, onSubmit, table, action, section, button, badge, editPanel, toast, loadFailed } from '../ui.js';
import { exportStatus } from './iscsi.js';

function createForm(datasets, refresh, dsError) {
  const ds = select({ id: 'nfs-dataset', name: 'dataset' }, datasets.length
    ? datasets.map((d) => ({ value: d.full_name, label: d.full_name }))
    : [{ value: '', label: dsError ? `datasets not loaded: ${dsError}` : 'no datasets — create one first' }]);
  const name = input({ id: 'nfs-name', name: 'name', placeholder: 'default pool_dataset', maxlength: 63 });
  const path = input({ id: 'nfs-path', name: 'path', placeholder: 'default /pool/dataset' });
  const clients = h('textarea', { id: 'nfs-clients', name: 'clients', placeholder: '192.168.1.0/24\n10.0.0.5\n(empty: any client)' });
  const ro = h('input', { type: 'checkbox', id: 'nfs-read-only' });
  const rootSquash = h('input', { type: 'checkbox', id: 'nfs-root-squash', checked: true });
  const allSquash = h('input', { type: 'checkbox', id: 'nfs-all-squash' });
  const err = errorBox('nfs-form-error');
  const form = h('form', { class: 'grid', id: 'nfs-form', 'aria-label': 'Create NFS export', novalidate: true },
    field('Dataset', ds), field('Export name', name, 'optional'), field('Export path', path, 'optional, absolute'),
    h('div', { class: 'span2' }, field('Allowed clients', clients, 'addresses or CIDRs, one per line; empty allows any')),
    h('div', {}, field('Read-only', ro), field('Root squash', rootSquash), field('Squash all users', allSquash)),
    h('div', { class: 'actions full' }, h('button', { type: 'submit', id: 'nfs-create' }, 'Create NFS export')),
    h('div', { class: 'full' }, err));
  onSubmit(form, err, {
    check: () => (!ds.value ? 'create a dataset first' : null)
      || (name.value.trim() ? v.name(name.value.trim(), 'export name') : null)
      || (path.value.trim() ? v.absPath(path.value.trim(), 'export path') || (path.value.trim() === '/' ? '"/" cannot be exported' : null) : null)
      || v.list(clients.value).map(v.cidr).find(Boolean) || null,
    run: () => {
      const body = { dataset: ds.value, clients: v.list(clients.value), read_only: ro.checked,
        root_squash: rootSquash.checked, all_squash: allSquash.checked };
      if (name.value.trim()) body.name = name.value.trim();
      if (path.value.trim()) body.path = path.value.trim();
      return post('exports/nfs', body);
    },
    done: async (x) => { toast(`NFS export ${x.name} created: ${x.path}`, 'ok'); form.reset(); rootSquash.checked = true; await refresh(); },
  });
  return form;
}

const ID_MAX = 4294967294;

function editForm(x, close, refresh) {
  const clients = h('textarea', { id: 'nfs-edit-clients', name: 'clients', placeholder: '(empty: any client)' },
    (x.clients || []).join('\n'));
  const check = (id, on) => h('input', { type: 'checkbox', id, checked: !!on });
  const ro = check('nfs-edit-read-only', x.read_only);
  const rootSquash = check('nfs-edit-root-squash', x.root_squash);
  const allSquash = check('nfs-edit-all-squash', x.all_squash);
  const enabled = check('nfs-edit-enabled', x.enabled);
  const anonuid = input({ id: 'nfs-edit-anonuid', name: 'anonuid', value: String(x.anonuid ?? 65534), inputmode: 'numeric' });
  const anongid = input({ id: 'nfs-edit-anongid', name: 'anongid', value: String(x.anongid ?? 65534), inputmode: 'numeric' });
  const err = errorBox('nfs-edit-form-error');
  const form = h('form', { class: 'grid', id: 'nfs-edit-form', 'aria-label': `Edit NFS export ${x.name}`, novalidate: true },
    h('div', { class: 'span2' }, field('Allowed clients', clients, 'addresses or CIDRs, one per line; empty allows any')),
    h('div', {}, field('Read-only', ro), field('Root squash', rootSquash), field('Squash all users', allSquash), field('Enabled', enabled)),
    h('div', { class: 'stack' }, field('Anonymous UID', anonuid, 'squashed users become this UID'), field('Anonymous GID', anongid)),
    h('div', { class: 'actions full' }, h('button', { type: 'submit', id: 'nfs-save' }, 'Save changes'),
      button('Cancel', { id: 'nfs-edit-cancel', onclick: close })),
    h('div', { class: 'full' }, err));
  onSubmit(form, err, {
    check: () => v.list(clients.value).map(v.cidr).find(Boolean)
      || v.intRange(anonuid.value.trim(), 0, ID_MAX, 'anonymous UID') || v.intRange(anongid.value.trim(), 0, ID_MAX, 'anonymous GID'),
    run: () => patch(`exports/nfs/${key(x.name)}`, {
      clients: v.list(clients.value), read_only: ro.checked, root_squash: rootSquash.checked, all_squash: allSquash.checked,
      anonuid: Number(anonuid.value), anongid: Number(anongid.value), enabled: enabled.checked,
    }),
    done: async () => { close(); toast(`NFS export ${x.name} updated`, 'ok'); await refresh(); },
  });
  return form;
}

export async function mount(root) {
  let dsError = null;
  const datasets = await get('datasets').catch((e) => { dsError = e.message; return []; });
  const listBox = h('div', { id: 'nfs-list' });
  const editBox = h('div', { id: 'nfs-edit' });
  const openEdit = (x) => {
    const close = () => fill(editBox);
    editPanel(editBox, `Edit NFS export ${x.name}`, editForm(x, close, refresh), 'nfs-edit-panel');
  };
  const refresh = async () => {
    try {
      const rows = await get('exports/nfs');
      fill(listBox, table([
        { label: 'Name', cell: (x) => h('div', {}, h('strong', {}, x.name), h('span', { class: 'sub' }, `dataset ${x.dataset}`)) },
        { label: 'Path', cell: (x) => h('span', { class: 'mono' }, x.path) },
        { label: 'Clients', cell: (x) => (x.clients && x.clients.length ? h('div', {}, x.clients.map((c) => h('span', { class: 'sub mono' }, c))) : 'any') },
        { label: 'Access', cell: (x) => h('div', { class: 'actions' }, badge(x.read_only ? 'read-only' : 'read-write', x.read_only ? 'muted' : 'ok', { 'data-testid': 'access' }),
          x.all_squash ? badge('all squash', 'warn') : x.root_squash ? badge('root squash', 'muted') : badge('no squash', 'warn'),
          x.all_squash || x.root_squash ? h('span', { class: 'sub mono', title: 'anonymous UID:GID' }, `→ ${x.anonuid}:${x.anongid}`) : null) },
        { label: 'Status', cell: exportStatus },
        { label: 'Actions', cell: (x) => h('div', { class: 'actions' },
          button('Edit', { class: 'btn small', 'data-testid': `nfs-edit-${x.name}`, onclick: () => openEdit(x) }),
          button(x.enabled ? 'Disable' : 'Enable', { class: 'btn small', 'data-testid': `nfs-toggle-${x.name}`,
            onclick: () => action(() => patch(`exports/nfs/${key(x.name)}`, { enabled: !x.enabled }), { ok: `${x.name} ${x.enabled ? 'disabled' : 'enabled'}`, refresh }) }),
          button('Delete', { class: 'btn small danger', 'data-testid': `nfs-delete-${x.name}`,
            onclick: () => action(() => del(`exports/nfs/${key(x.name)}`), { confirmText: `Delete NFS export ${x.name}? Clients lose access.`, ok: `${x.name} deleted`, refresh }) })) },
      ], rows, { testid: 'nfs-table', rowId: (x) => `nfs-row-${x.name}`, empty: 'No NFS exports yet.' }));
    } catch (e) {
      loadFailed(listBox, e, 'list NFS exports');
    }
  };
  fill(root, h('h1', {}, 'NFS exports'), section('Exports', listBox), editBox, section('Create NFS export', createForm(datasets, refresh, dsError)));
  await refresh();
}
