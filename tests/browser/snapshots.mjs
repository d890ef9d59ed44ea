// Web UI: the Snapshots page against a running nasd that has pool "sp" and volume
// "sp/v": take a snapshot through the form, clone it (prompt), add a periodic task
// and see it run, delete the snapshot (after the clone is gone) with the row button.
//   node snapshots.mjs --url http://127.0.0.1:8080
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';

const { values: opt } = parseArgs({ options: {
  url: { type: 'string', default: 'http://127.0.0.1:8080' },
  chromium: { type: 'string', default: process.env.CHROMIUM || '/usr/bin/chromium' },
} });
const base = opt.url.replace(/\/$/, '');
const api = async (method, p, body) => {
  const r = await fetch(`${base}/api/v1/${p}`, { method, headers: body ? { 'Content-Type': 'application/json' } : {},
    body: body ? JSON.stringify(body) : undefined });
  return r.status === 204 ? null : r.json();
};
const check = (c, msg) => { if (!c) throw new Error(msg); };
async function until(fn, what, ms = 10000) {
  const end = Date.now() + ms;
  while (Date.now() < end) { try { const v = await fn(); if (v) return v; } catch { /* retry */ } await new Promise((r) => setTimeout(r, 200)); }
  throw new Error(`timed out waiting for ${what}`);
}

const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'nasd-snap-ui-'));
const ctx = await chromium.launchPersistentContext(profile, { executablePath: opt.chromium, headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'] });
let ok = false;
try {
  const page = ctx.pages()[0] || await ctx.newPage();
  let answers = ['uiclone'];   // prompt answers, in order
  page.on('dialog', (d) => (d.type() === 'prompt' ? d.accept(answers.shift() ?? '') : d.accept()));
  await page.goto(`${base}/#/snapshots`);
  await page.waitForSelector('#snapshot-form');
  await page.selectOption('#snap-source', 'volume:sp/v');
  await page.fill('#snap-name', 'bad name');
  await page.click('#snapshot-create');
  await until(async () => (await page.textContent('[data-testid="snapshot-form-error"]'))?.trim(), 'client-side name error');
  await page.fill('#snap-name', 'ui1');
  await page.click('#snapshot-create');
  await page.waitForSelector('[data-testid="snap-row-ui1"]');
  check((await api('GET', 'volumes/sp/v/snapshots')).some((s) => s.name === 'ui1'), 'snapshot ui1 not in the API');
  await page.click('[data-testid="snap-clone-ui1"]');
  await until(async () => (await api('GET', 'volumes/sp/uiclone'))?.name === 'uiclone', 'clone uiclone');
  await page.click('[data-testid="snap-delete-ui1"]');   // refused: the clone depends on it
  await until(async () => (await page.textContent('#toasts'))?.includes('in use'), 'in-use message');
  await api('DELETE', 'volumes/sp/uiclone');
  await page.click('[data-testid="snap-delete-ui1"]');
  await until(async () => !(await page.$('[data-testid="snap-row-ui1"]')), 'row ui1 gone');
  await page.selectOption('#task-source', 'volume:sp/v');
  await page.selectOption('#task-every', '1h');
  await page.fill('#task-keep', '3');
  await page.fill('#task-prefix', 'uitask');
  await page.click('#task-create');
  await page.waitForSelector('[data-testid="snapshot-tasks-table"] tbody tr');
  await until(async () => (await api('GET', 'volumes/sp/v/snapshots')).some((s) => s.name.startsWith('uitask-')), 'the task ran');
  const task = (await api('GET', 'snapshot-tasks'))[0];
  answers = ['1d', '7'];
  await page.click(`[data-testid="task-edit-${task.id}"]`);
  await until(async () => { const t = await api('GET', `snapshot-tasks/${task.id}`); return t.interval_s === 86400 && t.keep === 7; }, 'task edited');
  // a volume with a snapshot: the page's Delete (confirmed) takes both
  await api('POST', 'volumes', { pool: 'sp', name: 'gone', size: '4M' });
  await api('POST', 'volumes/sp/gone/snapshots', { name: 'g1' });
  await page.goto(`${base}/#/volumes`);
  await page.click('[data-testid="volume-delete-sp/gone"]');
  await until(async () => (await api('GET', 'volumes')).every((v) => v.name !== 'gone'), 'volume with a snapshot deleted');
  ok = true;
  console.log('snapshots UI: ok');
} finally {
  await ctx.close();
  fs.rmSync(profile, { recursive: true, force: true });
}
process.exit(ok ? 0 : 1);
