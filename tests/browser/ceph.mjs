// The pool form with a Ceph backend: choosing "Ceph cluster" hides layout and member disks and
// shows the cluster fields; a missing key is refused in the page; a wrong RADOS pool shows the
// server's error; the right settings create the pool, listed with layout ceph and state ONLINE,
// and the key is never in any reply the page received; its page shows the cluster and syncs.
//   node ceph.mjs --url URL --shots DIR --mon MONITORS --key KEY
import path from 'node:path';
import { parseArgs } from 'node:util';
import { begin, check, log, until, launch, step } from './lib.mjs';

const { values: opt } = parseArgs({ options: { url: { type: 'string' }, shots: { type: 'string' },
  mon: { type: 'string' }, key: { type: 'string' } } });
const base = opt.url.replace(/\/$/, '');
let ok = false;
const b = await launch({ width: 1280, height: 900 });
const { page } = b;
const bodies = [];
page.on('response', async (r) => { if (r.url().includes('/api/v1/')) bodies.push(await r.text().catch(() => '')); });
const err = page.locator('[data-testid="pool-form-error"]');
try {
  begin('open the pools page, choose the Ceph backend');
  await page.goto(`${base}/#/pools`);
  await page.locator('#pool-backend').waitFor();
  check(await page.locator('#pool-ceph').isHidden(), 'ceph fields shown for a local pool');
  await page.selectOption('#pool-backend', 'ceph');
  check(await page.locator('#pool-ceph').isVisible(), 'ceph fields not shown');
  check(await page.locator('#pool-members').isHidden(), 'member disks still shown for a ceph pool');

  begin('a missing key is refused in the page');
  await page.fill('#pool-name', 'cephui');
  await page.fill('#pool-ceph-monitors', opt.mon);
  await page.fill('#pool-ceph-pool', 'nosuchpool');
  await page.click('#pool-create');
  await until(async () => /cephx key/.test(await err.textContent()), 'the missing-key message');

  begin('a RADOS pool that does not exist: the server says so');
  await page.fill('#pool-ceph-key', opt.key);
  await page.click('#pool-create');
  await until(async () => /nosuchpool: does not exist/.test(await err.textContent()), 'the server error', 30000);

  begin('the right pool: created, listed as ceph and ONLINE');
  await page.fill('#pool-ceph-pool', 'rbd');
  await page.click('#pool-create');
  const row = page.locator('[data-testid="pool-row-cephui"]');
  await row.waitFor({ timeout: 30000 });
  await until(async () => /ceph/.test(await row.innerText()) && /ONLINE/.test(await row.innerText()), 'row with ceph ONLINE');
  await page.screenshot({ path: path.join(opt.shots, 'ceph-pool.png'), fullPage: true });
  check(await page.locator('#pool-ceph').isHidden() && await page.locator('#pool-members').isVisible(),
    'after the reset the form shows the ceph fields, not the local ones');

  begin('the pool page shows the cluster, not member disks, and syncs');
  await page.locator('[data-testid="pool-details-cephui"]').click();
  await page.locator('[data-testid="ceph-health"]').waitFor();
  await until(async () => /HEALTH_OK/.test(await page.locator('[data-testid="ceph-health"]').innerText()), 'cluster health');
  check(/rbd/.test(await page.locator('[data-testid="ceph-pool"]').innerText()), 'RADOS pool not shown');
  check(await page.locator('#pool-members-list').isHidden(), 'member disks shown for a ceph pool');
  await page.click('#ceph-sync');
  await until(async () => /synced/.test(await page.locator('body').innerText()), 'the sync toast');
  await page.screenshot({ path: path.join(opt.shots, 'ceph-pool-detail.png'), fullPage: true });
  check(!bodies.some((t) => t.includes(opt.key)), 'a reply contained the cephx key');
  check(b.jsErrors.length === 0, `JavaScript errors: ${b.jsErrors.join(' | ')}`);
  log('  ceph pool created from the UI');
  ok = true;
} catch (e) {
  console.log(`[ui] step "${step}" failed: ${e.message}`);
  await page.screenshot({ path: path.join(opt.shots, 'ceph-failure.png'), fullPage: true }).catch(() => {});
} finally {
  await b.close();
}
console.log(ok ? 'PASS: ceph pool from the UI' : 'FAIL: ceph pool from the UI');
process.exit(ok ? 0 : 1);
