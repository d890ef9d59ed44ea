// Small hand-written SVG line chart.
//   lineChart({series: [{label, color, points: [[x, y], ...]}], xFormat, yFormat, unit, xUnit, height, title})
// unit names the y axis ("IOPS", "MB/s", "ms"); it is drawn beside the axis and kept in data-unit.
// returns an <svg>. data-max (largest y shown) and data-points let tests read what is drawn.
import { s } from './dom.js';

const PAD = { l: 56, r: 14, t: 26, b: 26 };

// Top of the y axis: 4 grid steps of 1, 2 or 5 x 10^n, so every label is a round number.
function niceTop(v) {
  if (!(v > 0)) return 4;
  const raw = v / 4;
  const p = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return 4 * m * p;
  return 40 * p;
}

// 3..6 x positions on round steps (seconds-friendly: 1, 2, 5, 10, 15, 30 s, 1, 2, 5, 10, 15, 30 min, 1, 2, 3, 6 h).
const STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];
function xTicks(x0, x1) {
  const step = STEPS.find((st) => (x1 - x0) / st <= 5) || (x1 - x0) / 4;
  const out = [];
  for (let x = Math.ceil(x0 / step) * step; x <= x1 + 1e-9; x += step) out.push(x);
  return out;
}

function shortNum(v) {
  if (v >= 1e9) return `${+(v / 1e9).toFixed(1)}G`;
  if (v >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (v >= 1e3) return `${+(v / 1e3).toFixed(1)}k`;
  return `${+v.toFixed(v < 10 ? 1 : 0)}`;
}

// width/height set the viewBox; the SVG scales to its container, so pick a width near the
// rendered one to keep text at its natural size.
export function lineChart({ series, xFormat = String, yFormat = shortNum, unit = '', xUnit = '', width = 1000, height = 220, title = '', label = title, empty = 'no data yet' }) {
  const W = width, H = height;
  const pts = series.flatMap((se) => se.points);
  const maxY = pts.reduce((m, p) => Math.max(m, p[1]), 0);
  const svg = s('svg', {
    viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img',
    'aria-label': `${label || 'chart'}${unit ? ` (${unit})` : ''}: ${series.map((se) => `${se.label} latest ${se.points.length ? yFormat(se.points[se.points.length - 1][1]) : 'none'}`).join(', ')}`,
    'data-max': maxY, 'data-points': pts.length, 'data-unit': unit,
  });
  if (unit) svg.append(s('text', { class: 'axis-unit', x: 0, y: 0, 'text-anchor': 'middle',
    transform: `translate(12 ${PAD.t + (H - PAD.t - PAD.b) / 2}) rotate(-90)` }, unit));
  if (xUnit) svg.append(s('text', { class: 'axis-unit', x: W - PAD.r, y: H - 8 - 14, 'text-anchor': 'end' }, xUnit));
  if (title) svg.append(s('text', { x: PAD.l, y: 16, class: 'chart-title' }, title));
  const plotW = W - PAD.l - PAD.r, plotH = H - PAD.t - PAD.b;
  const top = niceTop(maxY);
  // horizontal grid with y labels
  for (let i = 0; i <= 4; i++) {
    const y = PAD.t + plotH - (plotH * i) / 4;
    svg.append(s('line', { x1: PAD.l, x2: W - PAD.r, y1: y, y2: y, class: i ? 'grid' : 'axis' }));
    if (pts.length) svg.append(s('text', { x: PAD.l - 6, y: y + 4, class: 'tick', 'text-anchor': 'end' }, yFormat((top * i) / 4)));
  }
  if (!pts.length) {
    svg.append(s('text', { x: PAD.l + plotW / 2, y: PAD.t + plotH / 2, class: 'chart-empty', 'text-anchor': 'middle' }, empty));
    return svg;
  }
  const xs = pts.map((p) => p[0]);
  let x0 = Math.min(...xs), x1 = Math.max(...xs);
  if (x1 === x0) { x0 -= 1; x1 += 1; }
  const sx = (x) => PAD.l + ((x - x0) / (x1 - x0)) * plotW;
  const sy = (y) => PAD.t + plotH - (y / top) * plotH;
  for (const x of xTicks(x0, x1)) {
    const px = sx(x);
    const anchor = px < PAD.l + 20 ? 'start' : px > W - PAD.r - 20 ? 'end' : 'middle';
    svg.append(s('line', { x1: px, x2: px, y1: PAD.t + plotH, y2: PAD.t + plotH + 4, class: 'axis' }),
      s('text', { x: px, y: H - 8, class: 'tick', 'text-anchor': anchor }, xFormat(x)));
  }
  // legend, right-aligned in the title row
  let lx = W - PAD.r;
  for (const se of [...series].reverse()) {
    const label = s('text', { x: lx, y: 16, class: 'legend', 'text-anchor': 'end' }, se.label);
    lx -= se.label.length * 6.5 + 4;
    svg.append(label, s('rect', { x: lx - 10, y: 8, width: 10, height: 10, rx: 2, fill: se.color }));
    lx -= 22;
  }
  for (const se of series) {
    if (!se.points.length) continue;
    const d = se.points.map((p, i) => `${i ? 'L' : 'M'}${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join('');
    if (se.fill) {
      const base = sy(0).toFixed(1);
      svg.append(s('path', { d: `${d}L${sx(se.points[se.points.length - 1][0]).toFixed(1)},${base}L${sx(se.points[0][0]).toFixed(1)},${base}Z`, fill: se.color, class: 'area' }));
    }
    svg.append(s('path', { d, stroke: se.color, class: 'line', 'data-series': se.label,
      'data-max': se.points.reduce((m, p) => Math.max(m, p[1]), 0) }));
    // mark the latest value (and make a lone first sample visible at all)
    const [lx1, ly1] = se.points[se.points.length - 1];
    svg.append(s('circle', { cx: sx(lx1).toFixed(1), cy: sy(ly1).toFixed(1), r: 3.5, fill: se.color, class: 'dot' }));
  }
  return svg;
}
