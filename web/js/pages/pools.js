// Pools: list with health and capacity; create from member disks (files); import a pool
// from its disks; delete. #/pools/<name> shows one pool (pool_detail.js).
import { h, fill } from '../dom.js';
import { get, post, del, key } from '../api.js';
import * as fmt from '../format.js';
import * as v from '../validate.js';
import { withSpace, freeCell } from '../space.js';
import { field, input, select, errorBox, onSubmit, table, stateBadge, capacityBar, action, section, button, toast, loadFailed, showError } from '../ui.js';

const MIN_MEMBERS = { stripe: 1, mirror: 2, raidz1: 3, 'raidz1-inplace': 3 };
const MEMBER_MIN_SIZE = 64 * 1024 * 1024;
const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;

export function poolCapacity(p) {
  const has = (v) => typeof v === 'number';
  const parts = [has(p.used) ? `${fmt.bytes(p.used)} used` : null, has(p.allocated) ? `${fmt.bytes(p.allocated)} allocated` : null,
    `${fmt.bytes(p.size)} total`].filter(Boolean);
  return h('div', { class: 'cap' },
    capacityBar(has(p.used) ? p.used : 0, has(p.allocated) ? p.allocated : 0, p.size, `pool ${p.name} capacity`),
    h('span', { class: 'sub' }, parts.join(' · ')));
}

function memberRow(list, n) {
  const row = h('div', { class: 'member', 'data-testid': 'member-row' });
  const remove = button('Remove', { class: 'btn small', 'aria-label': `remove member ${n}`,
    onclick: () => { row.remove(); renumber(list); } });
  row.append(
    field(`Disk ${n} path`, input({ name: 'path', placeholder: '/srv/disks/d1.img', 'data-testid': 'member-path' })),
    field('Size', input({ name: 'size', placeholder: '1G', 'data-testid': 'member-size' })),
    field('create file', h('input', { type: 'checkbox', name: 'create', 'data-testid': 'member-create' })),
    remove);
  return row;
}

function renumber(list) {
  [...list.children].forEach((row, i) => {
    row.querySelector('label').textContent = `Disk ${i + 1} path`;
  });
}

// A pool on a Ceph cluster: volumes and datasets are RBD images in a RADOS pool; the
// cephx key is sent once and never shown again.
function cephFields(prefix) {
  const f = {
    monitors: input({ id: `${prefix}-ceph-monitors`, name: 'monitors', placeholder: '10.0.0.1:6789 or [v2:10.0.0.1:3300,v1:10.0.0.1:6789]' }),
    pool: input({ id: `${prefix}-ceph-pool`, name: 'ceph-pool', placeholder: 'rbd' }),
    user: input({ id: `${prefix}-ceph-user`, name: 'ceph-user', placeholder: 'admin' }),
    key: input({ id: `${prefix}-ceph-key`, name: 'ceph-key', type: 'password', placeholder: 'AQ...== (or a keyring path)', autocomplete: 'off' }),
    keyring: input({ id: `${prefix}-ceph-keyring`, name: 'ceph-keyring', placeholder: '/etc/ceph/ceph.client.admin.keyring' }),
  };
  const box = h('fieldset', { class: 'full', id: `${prefix}-ceph`, hidden: true }, h('legend', {}, 'Ceph cluster'),
    field('Monitors', f.monitors), field('RADOS pool', f.pool), field('cephx user', f.user, 'without "client."'),
    field('Key', f.key, 'stored, never shown again'), field('or keyring file', f.keyring));
  const value = () => {
    const c = { monitors: f.monitors.value.trim(), pool: f.pool.value.trim(), user: f.user.value.trim() || 'admin' };
    if (f.key.value.trim()) c.key = f.key.value.trim();
    if (f.keyring.value.trim()) c.keyring = f.keyring.value.trim();
    return c;
  };
  const check = () => (!f.monitors.value.trim() ? 'give the ceph monitors' : !f.pool.value.trim() ? 'give the RADOS pool'
    : !f.key.value.trim() && !f.keyring.value.trim() ? 'give the cephx key or a keyring path' : null);
  return { box, value, check };
}

function backendSelect(id) {
  return select({ id, name: 'backend' }, [
    { value: 'local', label: 'local disks (pool engine)' }, { value: 'ceph', label: 'Ceph cluster (RBD)' }]);
}

// suggestImport(name, paths): fills the import form (the disks hold an exported nasd pool).
function createForm(refresh, suggestImport) {
  const backend = backendSelect('pool-backend');
  const ceph = cephFields('pool');
  const name = input({ id: 'pool-name', name: 'name', placeholder: 'tank', required: true, maxlength: 63 });
  const layout = select({ id: 'pool-layout', name: 'layout' }, [
    { value: 'stripe', label: 'stripe (no redundancy)' }, { value: 'mirror', label: 'mirror' },
    { value: 'raidz1', label: 'raidz1 (single parity, log-structured: fast random writes and snapshots)' },
    { value: 'raidz1-inplace', label: 'raidz1-inplace (single parity, rewritten in place: no cleaner reserve, over 16 TiB)' }]);
  const comment = input({ id: 'pool-comment', name: 'comment', placeholder: 'optional' });
  const list = h('div', { id: 'pool-members' });
  const addMember = () => list.append(memberRow(list, list.children.length + 1));
  addMember();
  layout.addEventListener('change', () => {
    while (list.children.length < MIN_MEMBERS[layout.value]) addMember();
  });
  const err = errorBox('pool-form-error');
  const layoutField = field('Layout', layout, 'raidz1 and raidz1-inplace need 3+ disks, mirror 2+; raidz1 keeps about 6 % back for its cleaner and holds up to 16 TiB of data');
  const membersBox = h('fieldset', { class: 'members full' }, h('legend', {}, 'Member disks (absolute paths to files or block devices)'),
    list, button('Add member disk', { id: 'pool-add-member', class: 'btn small', onclick: addMember }));
  const isCeph = () => backend.value === 'ceph';
  backend.addEventListener('change', () => {
    ceph.box.hidden = !isCeph(); membersBox.hidden = isCeph(); layoutField.hidden = isCeph();
  });
  const form = h('form', { class: 'grid', id: 'pool-form', 'aria-label': 'Create pool', novalidate: true },
    field('Name', name, 'letters, digits, _ . : -'),
    field('Backend', backend, 'where the data lives'),
    layoutField,
    h('div', { class: 'span2' }, field('Comment', comment)),
    membersBox, ceph.box,
    h('div', { class: 'actions full' }, h('button', { type: 'submit', id: 'pool-create' }, 'Create pool')),
    h('div', { class: 'full' }, err));

  const members = () => [...list.children].map((row) => ({
    path: row.querySelector('[name=path]').value.trim(),
    size: row.querySelector('[name=size]').value.trim(),
    create: row.querySelector('[name=create]').checked,
  }));
  onSubmit(form, err, {
    check: () => {
      if (isCeph()) return v.name(name.value.trim(), 'pool name') || ceph.check();
      const ms = members();
      const problems = [v.name(name.value.trim(), 'pool name')];
      if (ms.length < MIN_MEMBERS[layout.value]) problems.push(`layout ${layout.value} needs at least ${MIN_MEMBERS[layout.value]} member disks`);
      ms.forEach((m, i) => {
        problems.push(v.absPath(m.path, `disk ${i + 1} path`));
        if (m.create || m.size) problems.push(v.size(m.size, `disk ${i + 1} size`, { min: MEMBER_MIN_SIZE }));
      });
      const paths = ms.map((m) => m.path);
      if (new Set(paths).size !== paths.length) problems.push('each member disk may be listed once');
      return problems.find(Boolean) || null;
    },
    run: (extra) => post('pools', isCeph() ? { name: name.value.trim(), backend: 'ceph', comment: comment.value, ceph: ceph.value() } : {
      name: name.value.trim(), layout: layout.value, comment: comment.value,
      members: members().map((m) => (m.size || m.create ? { path: m.path, size: m.size, create: m.create } : m.path)),
      ...extra,
    }),
    // the disks are members of an exported nasd pool: offer to import it instead of wiping
    fail: (e, askForce) => {
      const hit = e.data && Array.isArray(e.data.found) && e.data.found.find((f) => f.import);
      if (!hit) return false;
      const paths = e.data.found.filter((f) => f.import === hit.import).map((f) => f.path);
      fill(err, h('div', { class: 'stack', 'data-testid': 'import-suggestion' }, h('span', {}, fmt.humanize(e.message)),
        h('div', { class: 'actions' }, button(`Import pool ${hit.import} instead`, { class: 'btn primary', 'data-testid': 'import-instead',
          onclick: () => { showError(err, ''); suggestImport(hit.import, paths); } }),
        askForce ? button('Overwrite the disks…', { class: 'btn danger', 'data-testid': 'overwrite-instead', onclick: askForce }) : null)));
      err.hidden = false;
      return true;
    },
    done: async (p) => {
      toast(`pool ${p.name} created (${p.backend === 'ceph' ? `ceph pool ${p.ceph.pool}` : `${p.layout}, ${plural((p.members || []).length, 'disk')}`}, ${fmt.bytes(p.size)})`, 'ok');
      form.reset();
      backend.dispatchEvent(new Event('change'));   // reset() does not fire it: show the local fields again
      fill(list);
      addMember();
      await refresh();
    },
  });
  return form;
}

// Returns the form and suggest(name, paths), which fills it in and brings it into view.
function importForm(refresh) {
  const name = input({ id: 'import-name', name: 'name', placeholder: 'tank', maxlength: 63 });
  const disks = h('textarea', { id: 'import-members', name: 'members', placeholder: '/srv/disks/d1.img\n/srv/disks/d2.img' });
  const comment = input({ id: 'import-comment', name: 'comment', placeholder: 'optional' });
  const err = errorBox('import-form-error');
  const backend = backendSelect('import-backend');
  const ceph = cephFields('import');
  const isCeph = () => backend.value === 'ceph';
  const disksBox = h('div', { class: 'full' }, field('Member disks', disks, 'absolute paths, one per line; the disks\' labels give layout and order'));
  backend.addEventListener('change', () => { ceph.box.hidden = !isCeph(); disksBox.hidden = isCeph(); });
  const form = h('form', { class: 'grid', id: 'import-form', 'aria-label': 'Import pool', novalidate: true },
    field('Name', name, 'the pool is known by this name here'),
    field('Backend', backend, 'a ceph pool brings the volumes and datasets other gateways made'),
    h('div', { class: 'span2' }, field('Comment', comment)),
    disksBox, ceph.box,
    h('div', { class: 'actions full' }, h('button', { type: 'submit', id: 'import-submit' }, 'Import pool')),
    h('div', { class: 'full' }, err));
  onSubmit(form, err, {
    check: () => {
      if (isCeph()) return v.name(name.value.trim(), 'pool name') || ceph.check();
      const paths = v.list(disks.value);
      return v.name(name.value.trim(), 'pool name')
        || (paths.length ? null : 'list at least one member disk')
        || paths.map((d, i) => v.absPath(d, `disk ${i + 1} path`)).find(Boolean)
        || (new Set(paths).size !== paths.length ? 'each member disk may be listed once' : null);
    },
    run: (extra) => post(`pools/${key(name.value.trim())}/import`, isCeph() ? { backend: 'ceph', ceph: ceph.value(), comment: comment.value, ...extra }
      : { members: v.list(disks.value), comment: comment.value, ...extra }),
    done: async (p) => { toast(`pool ${p.name} imported (${p.layout}, ${p.state})`, 'ok'); form.reset(); backend.dispatchEvent(new Event('change')); await refresh(); },
  });
  const suggest = (poolName, paths) => {
    name.value = poolName;
    disks.value = paths.join('\n');
    form.scrollIntoView({ block: 'center' });
    form.querySelector('#import-submit').focus();
  };
  return { form, suggest };
}

export async function mount(root, arg) {
  if (arg) return (await import('./pool_detail.js')).mount(root, arg);
  const listBox = h('div', { id: 'pools-list' });
  const refresh = async () => {
    try {
      const [pools, volumes, datasets] = await Promise.all([get('pools'), get('volumes').catch(() => null), get('datasets').catch(() => null)]);
      const rows = volumes && datasets ? withSpace(pools, volumes, datasets) : pools;
      fill(listBox, table([
        { label: 'Name', cell: (p) => h('div', {}, h('a', { href: `#/pools/${encodeURIComponent(p.name)}`, class: 'strong',
          'data-testid': `pool-open-${p.name}` }, p.name), p.comment ? h('span', { class: 'sub' }, p.comment) : null) },
        { label: 'Layout', cell: (p) => p.layout },
        { label: 'State', cell: (p) => stateBadge(p.state) },
        { label: 'Members', cell: (p) => h('div', {}, (p.members || []).map((m) => h('span', { class: 'sub mono' },
          `${m.path} · ${fmt.bytes(m.size)}${m.state && m.state !== 'ONLINE' ? ` · ${m.state}` : ''}`))) },
        { label: 'Capacity', cell: poolCapacity },
        { label: 'Free', cell: freeCell },
        { label: 'Contents', cell: (p) => h('div', {}, h('span', { class: 'sub' }, plural(p.datasets, 'dataset')),
          h('span', { class: 'sub' }, plural(p.volumes, 'volume'))) },
        { label: 'Actions', cell: (p) => h('div', { class: 'actions' },
          h('a', { class: 'btn small', href: `#/pools/${encodeURIComponent(p.name)}`, 'data-testid': `pool-details-${p.name}` }, 'Details'),
          button('Delete', { class: 'btn small danger', 'data-testid': `pool-delete-${p.name}`,
          onclick: () => action(() => del(`pools/${key(p.name)}`), { confirmText: `Delete pool ${p.name}? Its member files are released.`, ok: `pool ${p.name} deleted`, refresh }) })) },
      ], rows, { testid: 'pools-table', rowId: (p) => `pool-row-${p.name}`, empty: 'No pools yet. Create one below.' }));
    } catch (e) {
      loadFailed(listBox, e, 'list pools');
    }
  };
  const imp = importForm(refresh);
  fill(root, h('h1', {}, 'Pools'), section('Pools', listBox), section('Create pool', createForm(refresh, imp.suggest)),
    section('Import pool', h('p', { class: 'muted hint-p' }, 'Adopt an existing pool (for example from another nasd) from its member disks.'),
      imp.form));
  await refresh();
}
