// Hash router: #/page[/arg]. Each page module exports mount(root, arg) -> dispose().
import { h, fill } from './dom.js';
import { get, onConnection, connectionState } from './api.js';
import { hasToken, forgetToken, askToken } from './token.js';
import * as fmt from './format.js';

const pages = {
  dashboard: () => import('./pages/dashboard.js'),
  pools: () => import('./pages/pools.js'),
  datasets: () => import('./pages/datasets.js'),
  volumes: () => import('./pages/volumes.js'),
  iscsi: () => import('./pages/iscsi.js'),
  nfs: () => import('./pages/nfs.js'),
  selftest: () => import('./pages/selftest.js'),
  snapshots: () => import('./pages/snapshots.js'),
};

let dispose = null;
let routeSeq = 0;

async function route() {
  const [, name = 'dashboard', ...rest] = (location.hash || '#/dashboard').split('/');
  const page = pages[name] ? name : 'dashboard';
  const seq = ++routeSeq;
  if (dispose) { dispose(); dispose = null; }
  document.getElementById('toasts').replaceChildren(); // notices belong to the page they came from
  for (const a of document.querySelectorAll('nav.side a')) {
    if (a.getAttribute('href') === `#/${page}`) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const main = document.getElementById('main');
  const root = h('div', { class: 'page', 'data-page': page });
  fill(main, root);
  let mod;
  try {
    mod = await pages[page]();
  } catch (e) { // the page's script could not be fetched (nasd down since the UI was opened)
    if (seq === routeSeq) fill(root, h('h1', {}, page), h('div', { class: 'error load-error', role: 'alert', 'data-testid': 'load-error' },
      `cannot load this page: ${e.message}`));
    return;
  }
  if (seq !== routeSeq) return; // navigated again while loading
  dispose = (await mod.mount(root, rest.map(decodeURIComponent).join('/'))) || null;
  document.title = `nasd · ${root.querySelector('h1')?.textContent || page}`;
}

// Header: host, version, uptime, services. Keeps the last answer while nasd is unreachable
// (the banner says so); polls faster while down to notice it coming back.
let sysTimer = null;
async function systemInfo() {
  clearTimeout(sysTimer);
  const el = document.getElementById('sysinfo');
  try {
    const s = await get('system');
    const svc = (label, up) => h('span', { class: `badge ${up ? 'ok' : 'muted'}` }, `${label} ${up ? 'up' : 'off'}`);
    fill(el, h('span', {}, `${s.hostname} · v${s.version} · up ${fmt.duration(s.uptime)}`),
      svc('iSCSI', s.iscsi.running), svc('NFS', s.nfs.running));
  } catch (e) {
    if (e.status === 401) {
      fill(el, h('span', { class: 'badge bad', 'data-testid': 'auth-needed' }, 'API token required'),
        h('button', { type: 'button', class: 'btn small', id: 'token-enter', onclick: async () => { if (await askToken({ force: true })) location.reload(); } }, 'Enter token'));
    } else if (!e.unreachable) {
      fill(el, h('span', { class: 'badge bad' }, `system info: ${e.message}`));
    } // unreachable: the banner says it, the last figures stay
  }
  sysTimer = setTimeout(systemInfo, connectionState() === 'down' ? 2000 : 10000);
}

function setupBanner() {
  const el = document.getElementById('conn-banner');
  onConnection((state, lastOk) => {
    el.hidden = state !== 'down';
    document.body.classList.toggle('offline', state === 'down');
    if (state === 'down') {
      fill(el, h('strong', {}, 'nasd unreachable'),
        ` — no answer from the daemon; what is shown is ${lastOk ? `from ${lastOk.toTimeString().slice(0, 8)}` : 'not loaded yet'}. Retrying…`);
      clearTimeout(sysTimer);
      sysTimer = setTimeout(systemInfo, 2000);
    }
  });
}

function setupLogout() {
  const btn = document.getElementById('logout');
  const sync = () => { btn.hidden = !hasToken(); };
  btn.addEventListener('click', () => { forgetToken(); location.reload(); });
  window.addEventListener('nasd-token', sync);
  window.addEventListener('storage', sync);
  sync();
}

// Phones: the menu is hidden behind a button; choosing a page closes it again.
function setupMenu() {
  const btn = document.getElementById('menu-toggle');
  const nav = document.getElementById('nav');
  const show = (open) => { nav.classList.toggle('open', open); btn.setAttribute('aria-expanded', String(open)); };
  btn.addEventListener('click', () => show(!nav.classList.contains('open')));
  nav.addEventListener('click', (ev) => { if (ev.target.closest('a')) show(false); });
}

setupMenu();
setupBanner();
setupLogout();
window.addEventListener('hashchange', route);
route();
systemInfo();
