// The UI while nasd is unreachable: kill nasd under an open dashboard -> a "nasd unreachable"
// banner, and the pools, counts and export rows shown before stay (also after the dashboard
// re-read its lists); a page loaded while nasd is down says it could not load, never "0 / 0"
// or "No pools yet"; nasd restarted -> the banner goes. Then nasd frozen (SIGSTOP): requests
// time out, the banner comes; thawed: it goes.
//   node unreachable.mjs --url URL --tmp DIR --shots DIR --pidfile FILE --restart SCRIPT
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import { begin, check, log, until, launch, rest, step } from './lib.mjs';

const { values: opt } = parseArgs({ options: { url: { type: 'string' }, tmp: { type: 'string' }, shots: { type: 'string' },
  pidfile: { type: 'string' }, restart: { type: 'string' } } });
const base = opt.url.replace(/\/$/, '');
const R = (m, p, b) => rest(base, m, p, b);
const pid = () => Number(fs.readFileSync(opt.pidfile, 'utf8').trim());
const alive = (p) => { try { process.kill(p, 0); return true; } catch { return false; } };
const POOL = 'downpool', VOL = 'v1', TGT = 'downt';

let ok = false;
const b = await launch({ width: 1280, height: 800 });
const { page } = b;
const tid = (id) => page.locator(`[data-testid="${id}"]`);
const banner = tid('unreachable-banner');
const mainText = () => page.locator('main').innerText();
try {
  begin('seed a pool, a volume and an iSCSI export; open the dashboard');
  await R('POST', 'pools', { name: POOL, layout: 'stripe', members: [{ path: path.join(opt.tmp, 'd1.img'), size: '128M', create: true }] });
  await R('POST', 'volumes', { pool: POOL, name: VOL, size: '16M' });
  await R('POST', 'exports/iscsi', { name: TGT, luns: [{ lun: 0, volume: `${POOL}/${VOL}` }] });
  await page.goto(`${base}/#/snapshots`); // loads the page's script while nasd is up
  await page.locator('main h1', { hasText: 'Snapshots' }).waitFor();
  await page.goto(`${base}/#/dashboard`);
  await tid(`dash-pool-${POOL}`).waitFor();
  await tid(`export-row-iscsi-${TGT}`).waitFor();
  check(await tid('card-pools').locator('.v').textContent() === '1 / 1', 'dashboard does not show 1 / 1 pools');
  check(await banner.isHidden(), 'banner shown while nasd is up');

  begin('kill nasd: the banner appears, the last data stays');
  const p1 = pid();
  process.kill(p1, 'SIGTERM');
  await until(async () => !alive(p1), 'nasd to exit', 10000);
  await until(async () => banner.isVisible(), 'the unreachable banner', 6000);
  check(/nasd unreachable/.test(await banner.textContent()), `banner says "${await banner.textContent()}"`);
  await page.waitForTimeout(5500); // the dashboard re-reads its lists every 5 s: let it fail at least once
  await page.screenshot({ path: path.join(opt.shots, 'dashboard-unreachable.png'), fullPage: true });
  check(await tid('card-pools').locator('.v').textContent() === '1 / 1', `pools card now "${await tid('card-pools').locator('.v').textContent()}"`);
  check(await tid(`dash-pool-${POOL}`).count() === 1, 'pool row gone while nasd is down');
  check(await tid(`export-row-iscsi-${TGT}`).count() === 1, 'export row gone while nasd is down');
  check(!/No pools yet|0 \/ 0/.test(await mainText()), 'fake empty state while nasd is down');
  check(await tid('sysinfo').innerText().then((t) => /up \d/.test(t)), 'header lost the last system info');

  begin('pages opened while nasd is down say so instead of showing empty lists');
  await tid('nav-pools').click(); // pools.js is loaded already (the dashboard uses it)
  await tid('load-error').waitFor();
  check(/cannot list pools/.test(await tid('load-error').textContent()), 'pools page does not say it could not list pools');
  check(!/No pools yet/.test(await mainText()), 'pools page shows "No pools yet" while nasd is down');
  await tid('nav-snapshots').click();
  await page.locator('#snapshots-list [data-testid="load-error"]').waitFor(); // tasks and replication lists say so too
  check(/cannot list volumes and datasets/.test(await page.locator('#snapshots-list').textContent()), 'snapshots page does not say it could not list');
  check(!/no volumes or datasets|Create a volume or dataset first/.test(await mainText()), 'snapshots page shows an empty state while nasd is down');
  await tid('nav-dashboard').click(); // a fresh dashboard, nothing loaded
  await tid('card-pools').waitFor();
  await page.waitForTimeout(1500);
  const cardText = await tid('card-pools').locator('.v').textContent();
  check(cardText === '—', `pools card "${cardText}" on a dashboard opened while nasd is down`);
  check(!/No pools yet|0 \/ 0/.test(await mainText()), 'fake empty state on a dashboard opened while down');
  check(await banner.isVisible(), 'banner gone while nasd is still down');

  begin('restart nasd: the banner goes, the data comes back');
  execFileSync(opt.restart, { stdio: 'inherit' });
  await page.goto(`${base}/#/dashboard`);
  await until(async () => banner.isHidden(), 'banner to go after the restart', 8000);
  await tid(`dash-pool-${POOL}`).waitFor();

  begin('freeze nasd (SIGSTOP): requests time out, the banner comes; thaw: it goes');
  const p2 = pid();
  process.kill(p2, 'SIGSTOP');
  try {
    await until(async () => banner.isVisible(), 'banner while nasd is frozen', 15000, 250);
    check(await tid(`dash-pool-${POOL}`).count() === 1, 'pool row gone while nasd is frozen');
  } finally {
    process.kill(p2, 'SIGCONT');
  }
  await until(async () => banner.isHidden(), 'banner to go after thawing', 12000, 250);
  check(b.jsErrors.length === 0, `JavaScript errors: ${b.jsErrors.join(' | ')}`);
  log('  banner shown and cleared for both a dead and a frozen nasd');
  ok = true;
} catch (e) {
  console.log(`[ui] step "${step}" failed: ${e.message}`);
  await page.screenshot({ path: path.join(opt.shots, 'failure.png'), fullPage: true }).catch(() => {});
} finally {
  await b.close();
}
console.log(ok ? 'PASS: UI with nasd unreachable' : 'FAIL: UI with nasd unreachable');
process.exit(ok ? 0 : 1);
