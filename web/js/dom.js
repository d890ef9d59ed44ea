// Tiny DOM builder: h('div', {class: 'x', onclick: fn}, child, ...). Text is always set
// as text nodes, never parsed as HTML, so API data cannot inject markup. Styles go through
// CSSOM (el.style), never a style attribute, so the UI runs under CSP style-src 'self'.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'style') el.style.cssText = v; // CSSOM, so a CSP without 'unsafe-inline' styles allows it
    else if (k === 'value' || k === 'checked' || k === 'selected' || k === 'disabled') el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// Replace all children of el.
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// SVG elements need their own namespace.
export function s(tag, attrs, ...children) {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  for (const c of children.flat()) if (c !== undefined && c !== null) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

let uid = 0;
export const nextId = (prefix) => `${prefix}-${++uid}`;
