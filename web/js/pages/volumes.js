// Volumes: block devices in a pool, exported as iSCSI LUNs; create, grow, delete.
import { h, fill } from '../dom.js';
import { get, post, patch, del, key } from '../api.js';
import * as fmt from '../format.js';
import * as v from '../validate.js';
import { field, input, select, errorBox, onSubmit, table, action, section, button, loadFailed, toast } from '../ui.js';
import { withSpace, fillPoolSelect } from '../space.js';

const MiB = 1024 * 1024;

function growEditor(vol, refresh) {
  const cell = h('div', { class: 'actions' });
  const show = () => fill(cell, button('Grow', { class: 'btn small', 'data-testid': `volume-grow-${vol.full_name}`, onclick: edit }));
  function edit() {
    const size = input({ placeholder: 'new size, e.g. 20G', 'aria-label': `new size for ${vol.full_name}`, size: 10, 'data-testid': 'volume-grow-input' });
    const err = h('span', { class: 'sub', role: 'alert' });
    const form = h('form', { class: 'actions' }, size, h('button', { type: 'submit', class: 'btn small' }, 'Grow'),
      button('Cancel', { class: 'btn small', onclick: show }), err);
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const s = size.value.trim();
      const problem = v.size(s, 'new size', { min: MiB, multiple: 4096 })
        || (v.parseSize(s) <= vol.size ? `volumes can only grow (now ${fmt.bytes(vol.size)})` : null);
      if (problem) { fill(err, problem); return; }
      await action(() => patch(`volumes/${key(vol.pool, vol.name)}`, { size: s }), { ok: `${vol.full_name} grown to ${s}`, refresh });
    });
    fill(cell, form);
    size.focus();
  }
  show();
  return cell;
}

export async function mount(root) {
  const listBox = h('div', { id: 'volumes-list' });
  const pool = select({ id: 'vol-pool', name: 'pool' }, []);
  // The list and the pool choice (with each pool's unreserved space) are re-read together,
  // so the figure in the form is never older than the list.
  const refresh = async () => {
    const [vols, pools, datasets] = await Promise.allSettled([get('volumes'), get('pools'), get('datasets')]);
    if (pools.status === 'fulfilled') fillPoolSelect(pool, withSpace(pools.value, vols.value, datasets.value));
    else if (!pool.options.length || !pools.reason.unreachable) fillPoolSelect(pool, [], pools.reason.message);
    try {
      if (vols.status === 'rejected') throw vols.reason;
      const rows = vols.value;
      fill(listBox, table([
        { label: 'Volume', cell: (x) => h('div', {}, h('strong', {}, x.full_name), x.comment ? h('span', { class: 'sub' }, x.comment) : null) },
        { label: 'Size', class: 'num', cell: (x) => fmt.bytes(x.size) },
        { label: 'Used', class: 'num', cell: (x) => fmt.bytes(x.used) },
        { label: 'Block size', class: 'num', cell: (x) => `${x.block_size} B` },
        { label: 'Compression', cell: (x) => x.compression },
        { label: 'LUN of', class: 'num', cell: (x) => `${x.exports} export${x.exports === 1 ? '' : 's'}` },
        { label: 'Actions', cell: (x) => h('div', { class: 'actions' }, growEditor(x, refresh),
          button('Delete', { class: 'btn small danger', 'data-testid': `volume-delete-${x.full_name}`,
            onclick: () => action(() => del(`volumes/${key(x.pool, x.name)}?force=true`), { confirmText: `Delete volume ${x.full_name}, its data and its snapshots?`, ok: `volume ${x.full_name} deleted`, refresh }) })) },
      ], rows, { testid: 'volumes-table', rowId: (x) => `volume-row-${x.full_name}`, empty: 'No volumes yet.' }));
    } catch (e) {
      loadFailed(listBox, e, 'list volumes');
    }
  };

  const name = input({ id: 'vol-name', name: 'name', placeholder: 'vol1', maxlength: 63 });
  const size = input({ id: 'vol-size', name: 'size', placeholder: '10G' });
  const bs = select({ id: 'vol-block-size', name: 'block_size' }, [{ value: '512', label: '512 bytes' }, { value: '4096', label: '4096 bytes' }]);
  const comp = select({ id: 'vol-compression', name: 'compression' }, ['off', 'lz4']);
  const err = errorBox('volume-form-error');
  const form = h('form', { class: 'grid', id: 'volume-form', 'aria-label': 'Create volume', novalidate: true },
    field('Pool', pool), field('Name', name, 'letters, digits, _ . : -'), field('Size', size, 'at least 1M, multiple of 4K'),
    field('Block size', bs), field('Compression', comp),
    h('div', { class: 'actions full' }, h('button', { type: 'submit', id: 'volume-create' }, 'Create volume')),
    h('div', { class: 'full' }, err));
  onSubmit(form, err, {
    check: () => (!pool.value ? 'create a pool first' : null) || v.name(name.value.trim(), 'volume name')
      || v.size(size.value.trim(), 'size', { min: MiB, multiple: 4096 }),
    run: () => post('volumes', { pool: pool.value, name: name.value.trim(), size: size.value.trim(),
      block_size: Number(bs.value), compression: comp.value }),
    done: async (vol) => {
      toast(`volume ${vol.full_name || `${pool.value}/${name.value.trim()}`} created (${fmt.bytes(vol.size)})`, 'ok');
      name.value = ''; size.value = ''; await refresh();
    },
  });
  fill(root, h('h1', {}, 'Volumes'), section('Volumes', listBox), section('Create volume', form));
  await refresh();
}
