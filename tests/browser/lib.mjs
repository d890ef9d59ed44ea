// Shared by the browser tests: chromium launch (Debian's, via playwright-core), polling
// waits, checks that throw, a step log and small REST calls to seed data.
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const t0 = Date.now();
export let step = '';
export const log = (msg) => console.log(`[ui ${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s] ${msg}`);
export function begin(name) { step = name; log(name); }
export function check(cond, msg) { if (!cond) throw new Error(msg); }

// Wait until fn() returns a truthy value (exceptions count as "not yet").
export async function until(fn, what, timeoutMs = 10000, everyMs = 150) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    try { last = await fn(); } catch { last = undefined; }
    if (last) return last;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

// A fresh profile per launch, so localStorage (the API token) never leaks between runs.
export async function launch({ width = 1280, height = 800, colorScheme = 'light', executable = process.env.CHROMIUM || '/usr/bin/chromium' } = {}) {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'nasd-ui-profile-'));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: executable, headless: true, viewport: { width, height }, colorScheme,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = ctx.pages()[0] || await ctx.newPage();
  page.setDefaultTimeout(15000);
  const jsErrors = [];
  page.on('pageerror', (e) => jsErrors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) jsErrors.push(m.text()); });
  const close = async () => { await ctx.close().catch(() => {}); fs.rmSync(profile, { recursive: true, force: true }); };
  return { ctx, page, jsErrors, close };
}

// REST call from the test itself (seeding data); throws on a non-2xx answer.
export async function rest(base, method, p, body, token) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (token) headers.Authorization = `Bearer ${token}`;
  const res = await fetch(`${base}/api/v1/${p}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  const data = text ? JSON.parse(text) : null;
  if (!res.ok) throw new Error(`${method} ${p} -> ${res.status}: ${text}`);
  return data;
}

// Horizontal overflow of the document and of every table beyond its card, in CSS pixels.
export function overflowReport(page) {
  return page.evaluate(() => {
    const doc = document.documentElement;
    const out = { scrollWidth: doc.scrollWidth, innerWidth: window.innerWidth, tables: [] };
    for (const t of document.querySelectorAll('main table')) {
      const box = (t.closest('.card') || t.parentElement).getBoundingClientRect();
      const r = t.getBoundingClientRect();
      if (r.width && r.right > box.right + 1) out.tables.push(`${t.dataset.testid || 'table'} right ${Math.round(r.right)} > card ${Math.round(box.right)}`);
    }
    // anything in <main> sticking out of the viewport (the usual culprit when scrollWidth grows)
    out.wide = [...document.querySelectorAll('main *')].filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1
      && !e.closest('.table-wrap')).slice(0, 3).map((e) => `${e.tagName.toLowerCase()}.${e.className || ''}#${e.id || ''} "${(e.textContent || '').slice(0, 30)}"`);
    return out;
  });
}
