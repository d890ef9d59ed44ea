// iSCSI exports: targets whose LUNs are volumes; CHAP and initiator ACL; create, edit
// (LUNs, alias, CHAP, initiators, immediate data, enabled), enable/disable, delete.
import { h, fill } from '../dom.js';
import { get, post, patch, del, key } from '../api.js';
import * as fmt from '../format.js';
import * as v from '../validate.js';
import { field, input, errorBox, onSubmit, table, action, section, button, badge, editPanel, toast, loadFailed } from '../ui.js';

const IMMEDIATE_HINT = 'small writes skip R2T';

export function exportStatus(x) {
  const attrs = { 'data-testid': 'status' };
  if (!x.enabled) return badge('disabled', 'muted', attrs);
  return x.active ? badge('active', 'ok', attrs) : badge('enabled, not active', 'warn', attrs);
}

function lunChecklist(volumes, failed) {
  if (failed) return h('div', { class: 'checklist error', id: 'iscsi-luns' }, `volumes not loaded: ${failed}`);
  if (!volumes.length) return h('div', { class: 'checklist muted', id: 'iscsi-luns' }, 'no volumes — create one first');
  return h('div', { class: 'checklist', id: 'iscsi-luns', role: 'group', 'aria-label': 'Volumes to export as LUNs' },
    volumes.map((vol) => h('label', {},
      h('input', { type: 'checkbox', name: 'lun', value: vol.full_name, 'data-testid': `iscsi-lun-${vol.full_name}` }),
      `${vol.full_name} (${fmt.bytes(vol.size)}, ${vol.block_size} B)`)));
}

function createForm(volumes, refresh, volumesError) {
  const name = input({ id: 'iscsi-name', name: 'name', placeholder: 't1', maxlength: 63 });
  const iqn = input({ id: 'iscsi-iqn', name: 'iqn', placeholder: 'default iqn.2026-12.io.nasd:<name>' });
  const luns = lunChecklist(volumes, volumesError);
  const chapUser = input({ id: 'iscsi-chap-user', name: 'chap_user', placeholder: 'none' });
  const chapSecret = input({ id: 'iscsi-chap-secret', name: 'chap_secret', type: 'password', autocomplete: 'new-password' });
  const mutualUser = input({ id: 'iscsi-mutual-user', name: 'mutual_user', placeholder: 'none' });
  const mutualSecret = input({ id: 'iscsi-mutual-secret', name: 'mutual_secret', type: 'password', autocomplete: 'new-password' });
  const inits = h('textarea', { id: 'iscsi-initiators', name: 'initiators', placeholder: 'iqn.1994-05.com.redhat:client1\n(empty: any initiator)' });
  const enabled = h('input', { type: 'checkbox', id: 'iscsi-enabled', checked: true });
  const immediate = h('input', { type: 'checkbox', id: 'iscsi-immediate' });
  const err = errorBox('iscsi-form-error');
  const form = h('form', { class: 'grid', id: 'iscsi-form', 'aria-label': 'Create iSCSI export', novalidate: true },
    field('Name', name, 'letters, digits, _ . : -'),
    h('div', { class: 'span2' }, field('Target IQN', iqn, 'optional')),
    field('Enabled', enabled),
    field('Immediate data', immediate, IMMEDIATE_HINT),
    h('div', { class: 'full field' }, h('span', { class: 'label', id: 'iscsi-luns-label' }, 'LUNs (in order: LUN 0, 1, ...)'), luns),
    field('CHAP user', chapUser, 'optional'), field('CHAP secret', chapSecret, '12..16 characters'),
    field('Mutual CHAP user', mutualUser, 'optional'), field('Mutual CHAP secret', mutualSecret, 'differs from CHAP secret'),
    h('div', { class: 'full' }, field('Allowed initiators', inits, 'one IQN per line; empty allows any initiator')),
    h('div', { class: 'actions full' }, h('button', { type: 'submit', id: 'iscsi-create' }, 'Create iSCSI export')),
    h('div', { class: 'full' }, err));
  const chosen = () => [...luns.querySelectorAll('input[name=lun]:checked')].map((c) => c.value);
  onSubmit(form, err, {
    check: () => v.name(name.value.trim(), 'export name')
      || (iqn.value.trim() ? v.iqn(iqn.value.trim(), 'target IQN') : null)
      || (chosen().length ? null : 'pick at least one volume as LUN')
      || v.chap(chapUser.value, chapSecret.value, 'CHAP') || v.chap(mutualUser.value, mutualSecret.value, 'mutual CHAP')
      || (mutualUser.value && !chapUser.value ? 'mutual CHAP needs one-way CHAP too' : null)
      || (chapSecret.value && chapSecret.value === mutualSecret.value ? 'mutual secret must differ from the CHAP secret' : null)
      || v.list(inits.value).map((i) => v.iqn(i, 'initiator')).find(Boolean) || null,
    run: () => {
      const body = { name: name.value.trim(), luns: chosen().map((vol, lun) => ({ lun, volume: vol })),
        initiators: v.list(inits.value), enabled: enabled.checked, immediate_data: immediate.checked };
      if (iqn.value.trim()) body.iqn = iqn.value.trim();
      if (chapUser.value) Object.assign(body, { chap_user: chapUser.value, chap_secret: chapSecret.value });
      if (mutualUser.value) Object.assign(body, { mutual_user: mutualUser.value, mutual_secret: mutualSecret.value });
      return post('exports/iscsi', body);
    },
    done: async (x) => { toast(`iSCSI export ${x.name} created: ${x.iqn}`, 'ok'); form.reset(); enabled.checked = true; await refresh(); },
  });
  return form;
}

// LUN numbers for the checked volumes: volumes already exported keep their LUN, new ones
// take the lowest free numbers, so editing never renumbers what initiators already see.
export function assignLuns(current, chosen) {
  const keep = new Map(current.map((l) => [l.volume, l.lun]));
  const used = new Set(chosen.filter((vol) => keep.has(vol)).map((vol) => keep.get(vol)));
  let next = 0;
  return chosen.map((vol) => {
    if (keep.has(vol)) return { lun: keep.get(vol), volume: vol };
    while (used.has(next)) next++;
    used.add(next);
    return { lun: next, volume: vol };
  }).sort((a, b) => a.lun - b.lun);
}

function editForm(x, volumes, close, refresh) {
  const current = new Set(x.luns.map((l) => l.volume));
  const vols = [...volumes];
  for (const l of x.luns) if (!vols.some((vol) => vol.full_name === l.volume)) vols.push({ full_name: l.volume, size: l.size, block_size: l.block_size });
  const luns = h('div', { class: 'checklist', id: 'iscsi-edit-luns', role: 'group', 'aria-label': 'Volumes exported as LUNs' },
    vols.map((vol) => h('label', {},
      h('input', { type: 'checkbox', name: 'lun', value: vol.full_name, checked: current.has(vol.full_name),
        'data-testid': `iscsi-edit-lun-${vol.full_name}` }),
      `${vol.full_name} (${fmt.bytes(vol.size)}, ${vol.block_size} B)`,
      current.has(vol.full_name) ? h('span', { class: 'muted' }, ` · LUN ${x.luns.find((l) => l.volume === vol.full_name).lun}`) : null)));
  const alias = input({ id: 'iscsi-edit-alias', name: 'alias', value: x.alias || '', maxlength: 63, placeholder: 'none' });
  const secretHint = (set) => (set ? 'set; leave empty to keep it' : '12..16 characters');
  const chapUser = input({ id: 'iscsi-edit-chap-user', name: 'chap_user', value: x.chap_user || '', placeholder: 'none' });
  const chapSecret = input({ id: 'iscsi-edit-chap-secret', name: 'chap_secret', type: 'password', autocomplete: 'new-password',
    placeholder: x.chap_secret_set ? '(unchanged)' : '' });
  const mutualUser = input({ id: 'iscsi-edit-mutual-user', name: 'mutual_user', value: x.mutual_user || '', placeholder: 'none' });
  const mutualSecret = input({ id: 'iscsi-edit-mutual-secret', name: 'mutual_secret', type: 'password', autocomplete: 'new-password',
    placeholder: x.mutual_secret_set ? '(unchanged)' : '' });
  const inits = h('textarea', { id: 'iscsi-edit-initiators', name: 'initiators', placeholder: '(empty: any initiator)' },
    (x.initiators || []).join('\n'));
  const enabled = h('input', { type: 'checkbox', id: 'iscsi-edit-enabled', checked: !!x.enabled });
  const immediate = h('input', { type: 'checkbox', id: 'iscsi-edit-immediate', checked: !!x.immediate_data });
  const err = errorBox('iscsi-edit-form-error');
  const form = h('form', { class: 'grid', id: 'iscsi-edit-form', 'aria-label': `Edit iSCSI export ${x.name}`, novalidate: true },
    h('div', { class: 'span2' }, field('Alias', alias, 'optional, shown to initiators')),
    field('Enabled', enabled),
    field('Immediate data', immediate, `${IMMEDIATE_HINT}, from the next login`),
    h('div', { class: 'full field' }, h('span', { class: 'label' }, 'LUNs (exported volumes keep their LUN number; new ones take the next free)'), luns),
    field('CHAP user', chapUser, 'empty removes CHAP'), field('CHAP secret', chapSecret, secretHint(x.chap_secret_set)),
    field('Mutual CHAP user', mutualUser, 'empty removes mutual CHAP'), field('Mutual CHAP secret', mutualSecret, secretHint(x.mutual_secret_set)),
    h('div', { class: 'full' }, field('Allowed initiators', inits, 'one IQN per line; empty allows any initiator')),
    h('div', { class: 'actions full' }, h('button', { type: 'submit', id: 'iscsi-save' }, 'Save changes'),
      button('Cancel', { id: 'iscsi-edit-cancel', onclick: close })),
    h('div', { class: 'full' }, err));
  const chosen = () => [...luns.querySelectorAll('input[name=lun]:checked')].map((c) => c.value);
  // A CHAP pair needs a secret unless one is stored already for the same user.
  const chapProblem = (user, secret, wasUser, wasSet, label) => {
    if (!user) return null;
    if (!secret && wasSet && user === wasUser) return null;
    if (!secret && wasSet) return `${label}: enter the secret again when changing the user`;
    return v.chap(user, secret, label);
  };
  onSubmit(form, err, {
    check: () => (chosen().length ? null : 'keep at least one volume as LUN')
      || (alias.value.length > 63 ? 'alias longer than 63 characters' : null)
      || chapProblem(chapUser.value, chapSecret.value, x.chap_user, x.chap_secret_set, 'CHAP')
      || chapProblem(mutualUser.value, mutualSecret.value, x.mutual_user, x.mutual_secret_set, 'mutual CHAP')
      || (mutualUser.value && !chapUser.value ? 'mutual CHAP needs one-way CHAP too' : null)
      || (chapSecret.value && chapSecret.value === mutualSecret.value ? 'mutual secret must differ from the CHAP secret' : null)
      || v.list(inits.value).map((i) => v.iqn(i, 'initiator')).find(Boolean) || null,
    run: () => {
      const body = { alias: alias.value, initiators: v.list(inits.value), enabled: enabled.checked,
        immediate_data: immediate.checked, chap_user: chapUser.value, mutual_user: mutualUser.value };
      const picked = chosen();
      if (picked.length !== current.size || picked.some((vol) => !current.has(vol))) body.luns = assignLuns(x.luns, picked);
      if (!chapUser.value) body.chap_secret = '';
      else if (chapSecret.value) body.chap_secret = chapSecret.value;
      if (!mutualUser.value) body.mutual_secret = '';
      else if (mutualSecret.value) body.mutual_secret = mutualSecret.value;
      return patch(`exports/iscsi/${key(x.name)}`, body);
    },
    done: async () => { close(); toast(`iSCSI export ${x.name} updated`, 'ok'); await refresh(); },
  });
  return form;
}

export async function mount(root) {
  let volumesError = null;
  const volumes = await get('volumes').catch((e) => { volumesError = e.message; return []; });
  const listBox = h('div', { id: 'iscsi-list' });
  const editBox = h('div', { id: 'iscsi-edit' });
  const openEdit = (x) => {
    const close = () => fill(editBox);
    editPanel(editBox, `Edit iSCSI export ${x.name}`, editForm(x, volumes, close, refresh), 'iscsi-edit-panel');
  };
  const refresh = async () => {
    try {
      const rows = await get('exports/iscsi');
      fill(listBox, table([
        { label: 'Name', cell: (x) => h('div', {}, h('strong', {}, x.name), h('span', { class: 'sub mono' }, x.iqn),
          x.alias ? h('span', { class: 'sub', 'data-testid': 'alias' }, `alias ${x.alias}`) : null) },
        { label: 'LUNs', cell: (x) => h('div', {}, x.luns.map((l) => h('span', { class: 'sub' }, `LUN ${l.lun}: ${l.volume} (${fmt.bytes(l.size)})`))) },
        { label: 'CHAP', cell: (x) => h('span', { 'data-testid': 'chap' }, x.chap_user ? `${x.chap_user}${x.mutual_user ? ` + mutual ${x.mutual_user}` : ''}` : 'none') },
        { label: 'Initiators', cell: (x) => (x.initiators && x.initiators.length
          ? h('div', {}, x.initiators.map((i) => h('span', { class: 'sub mono' }, i))) : 'any') },
        { label: 'Portal', cell: (x) => h('div', {}, h('span', { class: 'mono' }, x.portal || '—'),
          x.immediate_data ? h('span', { class: 'sub', 'data-testid': 'immediate' }, 'immediate data') : null) },
        { label: 'Status', cell: exportStatus },
        { label: 'Actions', cell: (x) => h('div', { class: 'actions' },
          button('Edit', { class: 'btn small', 'data-testid': `iscsi-edit-${x.name}`, onclick: () => openEdit(x) }),
          button(x.enabled ? 'Disable' : 'Enable', { class: 'btn small', 'data-testid': `iscsi-toggle-${x.name}`,
            onclick: () => action(() => patch(`exports/iscsi/${key(x.name)}`, { enabled: !x.enabled }), { ok: `${x.name} ${x.enabled ? 'disabled' : 'enabled'}`, refresh }) }),
          button('Delete', { class: 'btn small danger', 'data-testid': `iscsi-delete-${x.name}`,
            onclick: () => action(() => del(`exports/iscsi/${key(x.name)}`), { confirmText: `Delete iSCSI export ${x.name}? Initiators lose access.`, ok: `${x.name} deleted`, refresh }) })) },
      ], rows, { testid: 'iscsi-table', rowId: (x) => `iscsi-row-${x.name}`, empty: 'No iSCSI exports yet.' }));
    } catch (e) {
      loadFailed(listBox, e, 'list iSCSI exports');
    }
  };
  fill(root, h('h1', {}, 'iSCSI exports'), section('Targets', listBox), editBox, section('Create iSCSI export', createForm(volumes, refresh, volumesError)));
  await refresh();
}
