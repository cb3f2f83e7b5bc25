// hilbert view: the run dashboard. Plain JavaScript and SVG, no library:
// the listing (/api/runs) is polled, and each ticked run's metrics.jsonl
// is followed by byte offset (/api/runs/NAME/metrics?from=OFFSET&step=S),
// so a running run's curves grow without a reload.
//
// For tests, each chart's <svg> carries data-chart, and each drawn series
// a <path class="series"> with data-run, data-series and data-points (the
// number of points); <body> gets data-ready once the first listing is in,
// and data-records (records held, all ticked runs) after each update.
//
// The URL keeps the view: ?tick=RUN,RUN&x=tokens&smooth=0.6&log-loss=1
// (log-CHART for each chart), and poll=MS sets the polling interval.
'use strict';

(function () {
  const params = new URLSearchParams(location.search);
  const pollMs = Math.max(100, Number(params.get('poll')) || 2000);
  const listEvery = 3; // list the runs every third poll

  const palette = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#bcbd22', '#7f7f7f'];

  const state = {
    runs: [],          // the listing's runs
    byName: new Map(), // name -> run
    ticked: new Set(),
    data: new Map(),   // name -> {offset, step, records}
    x: params.get('x') === 'tokens' ? 'tokens' : 'step',
    smoothing: Math.min(0.99, Math.max(0, Number(params.get('smooth')) || 0)),
    log: {},
    detail: null,      // {kind: 'run'|'compare', name}
  };
  for (const n of (params.get('tick') || '').split(',')) if (n) state.ticked.add(n);

  // ---- charts ----------------------------------------------------------

  const num = (v) => typeof v === 'number' && isFinite(v);
  const pick = (recs, x, f) => {
    const pts = [];
    for (const r of recs) {
      const y = f(r);
      if (num(y) && num(r[x])) pts.push([r[x], y]);
    }
    return pts;
  };
  const peak = (run, key) => {
    const v = run && run.settings ? Number(run.settings[key]) : NaN;
    return isFinite(v) ? v : NaN;
  };

  // Each chart lists, for one run, its series: key, label, points, and
  // how to draw them (dash, markers, smooth: whether smoothing applies).
  const charts = [
    { id: 'loss', title: 'Loss (nats/token)', log: false, series: (run, recs, x) => [
      { key: 'train', label: 'train', smooth: true, pts: pick(recs.filter((r) => r.step > 0), x, (r) => r.loss) },
      { key: 'val', label: 'validation', dash: '5 3', markers: true, pts: pick(recs, x, (r) => r.val_loss) },
    ] },
    { id: 'diameter', title: 'Head step row diameter D(S_t)', log: true, series: (run, recs, x) => {
      const s = [{ key: 'diameter', label: 'D(S_t)', markers: true, pts: pick(recs, x, (r) => r.diameter > 0 ? r.diameter : NaN) }];
      if (run && run.head === 'rownorm') {
        s.push({ key: 'bound', label: '2·lr_t (RowNorm bound)', dash: '2 3', faint: true,
          pts: pick(recs, x, (r) => r.diameter > 0 && r.head_lr > 0 ? 2 * r.head_lr : NaN) });
      }
      return s;
    } },
    { id: 'hilbert_rms', title: 'Hilbert RMS of the head step', log: true, series: (run, recs, x) => [
      { key: 'hilbert_rms', label: 'Hilbert RMS', markers: true, pts: pick(recs, x, (r) => r.hilbert_rms > 0 ? r.hilbert_rms : NaN) },
    ] },
    { id: 'lr', title: 'Learning rates', log: false, series: (run, recs, x) => {
      const groups = [['muon_lr', 'Muon (blocks)', ''], ['embed_lr', 'embedding AdamW', '6 3'], ['head_lr', 'head', '2 2']];
      const known = groups.filter((g) => isFinite(peak(run, g[0])));
      if (known.length === 0) {
        return [{ key: 'lr_scale', label: 'schedule multiplier (peaks not yet known)', pts: pick(recs.filter((r) => r.step > 0), x, (r) => r.lr_scale) }];
      }
      return known.map((g) => ({ key: g[0], label: g[1], dash: g[2],
        pts: pick(recs.filter((r) => r.step > 0), x, (r) => r.lr_scale * peak(run, g[0])) }));
    } },
    { id: 'grad_norm', title: 'Gradient norm (before clipping)', log: false, series: (run, recs, x) => [
      { key: 'grad_norm', label: 'gradient norm', smooth: true, pts: pick(recs.filter((r) => r.step > 0), x, (r) => r.grad_norm) },
    ] },
    { id: 'throughput', title: 'Throughput (tokens/s)', log: false, series: (run, recs, x) => [
      { key: 'tokens_per_s', label: 'tokens/s', smooth: true, pts: pick(recs.filter((r) => r.step > 0), x, (r) => r.tokens_per_s) },
    ] },
  ];
  for (const c of charts) state.log[c.id] = params.has('log-' + c.id) ? params.get('log-' + c.id) === '1' : c.log;

  const svgNS = 'http://www.w3.org/2000/svg';
  const el = (tag, attrs, parent) => {
    const e = document.createElementNS(svgNS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  };
  const h = (tag, attrs, text) => {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  };

  const fmt = (v) => {
    if (!num(v)) return '—';
    const a = Math.abs(v);
    if (a >= 1e6) return (v / 1e6).toPrecision(3).replace(/\.?0+$/, '') + 'M';
    if (a >= 1e4) return (v / 1e3).toPrecision(3).replace(/\.?0+$/, '') + 'k';
    if (a === 0) return '0';
    if (a < 1e-3) return v.toExponential(2);
    return Number(v.toPrecision(4)).toString();
  };

  // Ticks: "nice" linear steps, or the decades (with 2 and 5 when few).
  const linearTicks = (lo, hi) => {
    const span = hi - lo || Math.abs(hi) || 1;
    const raw = span / 5;
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw);
    const ticks = [];
    for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push(Math.abs(t) < step * 1e-9 ? 0 : t);
    return ticks;
  };
  const logTicks = (lo, hi) => {
    // Within a decade or so, the linear ticks read better.
    if (hi / lo < 12) return linearTicks(lo, hi).filter((t) => t > 0);
    const a = Math.floor(Math.log10(lo)), b = Math.ceil(Math.log10(hi));
    const ticks = [];
    for (let e = a; e <= b; e++) {
      for (const m of (b - a <= 2 ? [1, 2, 5] : [1])) {
        const t = m * Math.pow(10, e);
        if (t >= lo && t <= hi) ticks.push(t);
      }
    }
    return ticks;
  };

  // Smoothing: the debiased exponential moving average TensorBoard uses.
  const smooth = (pts, w) => {
    if (!(w > 0)) return pts;
    let last = 0, n = 0;
    return pts.map(([x, y]) => {
      last = last * w + (1 - w) * y;
      n++;
      return [x, last / (1 - Math.pow(w, n))];
    });
  };

  // A run keeps its colour: the order in which the page first listed it.
  const colorIndex = new Map();
  const runColor = (name) => palette[(colorIndex.get(name) || 0) % palette.length];

  function drawChart(c, box) {
    const W = Math.max(320, box.clientWidth - 16 || 460), H = 240;
    const m = { l: 58, r: 12, t: 8, b: 30 };
    const log = state.log[c.id];
    const lines = [];
    for (const name of tickedNames()) {
      const d = state.data.get(name);
      if (!d) continue;
      const run = state.byName.get(name);
      for (const s of c.series(run, d.records, state.x)) {
        const pts = log ? s.pts.filter((p) => p[1] > 0) : s.pts;
        lines.push(Object.assign({}, s, { run: name, color: runColor(name), pts: pts, shown: s.smooth ? smooth(pts, state.smoothing) : pts }));
      }
    }
    const svg = box.querySelector('svg');
    svg.innerHTML = '';
    svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
    const all = lines.flatMap((l) => l.pts.concat(l.shown));
    if (all.length === 0) {
      el('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle', class: 'empty' }, svg).textContent = tickedNames().length ? 'nothing logged yet' : 'tick a run';
      box._hover = null;
      renderLegend(box, lines);
      return;
    }
    let x0 = Math.min(...all.map((p) => p[0])), x1 = Math.max(...all.map((p) => p[0]));
    let y0 = Math.min(...all.map((p) => p[1])), y1 = Math.max(...all.map((p) => p[1]));
    if (x0 === x1) { x0 -= 1; x1 += 1; }
    if (log) {
      if (y0 === y1) { y0 /= 2; y1 *= 2; }
      const pad = Math.pow(y1 / y0, 0.05);
      y0 /= pad; y1 *= pad;
    } else {
      if (y0 === y1) { const d = Math.abs(y0) * 0.1 || 1; y0 -= d; y1 += d; }
      const pad = (y1 - y0) * 0.05;
      y0 -= pad; y1 += pad;
    }
    const sx = (x) => m.l + (x - x0) / (x1 - x0) * (W - m.l - m.r);
    const sy = log
      ? (y) => H - m.b - (Math.log(y) - Math.log(y0)) / (Math.log(y1) - Math.log(y0)) * (H - m.t - m.b)
      : (y) => H - m.b - (y - y0) / (y1 - y0) * (H - m.t - m.b);
    for (const t of (log ? logTicks(y0, y1) : linearTicks(y0, y1))) {
      el('line', { x1: m.l, x2: W - m.r, y1: sy(t), y2: sy(t), class: 'grid' }, svg);
      el('text', { x: m.l - 4, y: sy(t) + 4, 'text-anchor': 'end' }, svg).textContent = fmt(t);
    }
    for (const t of linearTicks(x0, x1)) {
      el('line', { x1: sx(t), x2: sx(t), y1: m.t, y2: H - m.b, class: 'grid' }, svg);
      el('text', { x: sx(t), y: H - m.b + 14, 'text-anchor': 'middle' }, svg).textContent = fmt(t);
    }
    el('line', { x1: m.l, x2: m.l, y1: m.t, y2: H - m.b, class: 'axis' }, svg);
    el('line', { x1: m.l, x2: W - m.r, y1: H - m.b, y2: H - m.b, class: 'axis' }, svg);
    el('text', { x: W - m.r, y: H - 2, 'text-anchor': 'end' }, svg).textContent = state.x === 'tokens' ? 'tokens' : 'update';
    const d = (pts) => pts.map((p, i) => (i ? 'L' : 'M') + sx(p[0]).toFixed(1) + ' ' + sy(p[1]).toFixed(1)).join('');
    for (const l of lines) {
      if (l.pts.length === 0) continue;
      const smoothed = l.shown !== l.pts;
      if (smoothed) el('path', { d: d(l.pts), fill: 'none', stroke: l.color, 'stroke-width': 1, opacity: 0.25, class: 'raw' }, svg);
      const p = el('path', { d: d(l.shown), fill: 'none', stroke: l.color, 'stroke-width': l.faint ? 1.2 : 1.6, class: 'series',
        'data-run': l.run, 'data-series': l.key, 'data-points': l.pts.length }, svg);
      if (l.dash) p.setAttribute('stroke-dasharray', l.dash);
      if (l.faint) p.setAttribute('opacity', 0.7);
      if (l.markers || l.pts.length === 1) for (const q of l.shown) el('circle', { cx: sx(q[0]), cy: sy(q[1]), r: 2.5, fill: l.color }, svg);
    }
    const cursor = el('line', { y1: m.t, y2: H - m.b, stroke: '#888', 'stroke-dasharray': '3 3', visibility: 'hidden' }, svg);
    const dots = el('g', {}, svg);
    box._hover = { sx, sy, x0, x1, m, W, lines, cursor, dots };
    renderLegend(box, lines);
  }

  function renderLegend(box, lines) {
    const lg = box.querySelector('.legend');
    lg.innerHTML = '';
    for (const l of lines) {
      const item = h('span');
      const s = el('svg', { viewBox: '0 0 22 10' });
      const line = el('line', { x1: 1, x2: 21, y1: 5, y2: 5, stroke: l.color, 'stroke-width': 2 }, s);
      if (l.dash) line.setAttribute('stroke-dasharray', l.dash);
      item.appendChild(s);
      item.appendChild(document.createTextNode(' ' + l.run + ' · ' + l.label + (l.pts.length ? '' : ' (none)')));
      lg.appendChild(item);
    }
  }

  // Hover: the point of each series nearest the cursor's x.
  function nearest(pts, x) {
    let lo = 0, hi = pts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (pts[mid][0] < x) lo = mid + 1; else hi = mid;
    }
    if (lo > 0 && Math.abs(pts[lo - 1][0] - x) <= Math.abs(pts[lo][0] - x)) lo--;
    return pts[lo];
  }

  function hover(box, ev) {
    const hv = box._hover, tip = document.getElementById('tooltip');
    if (!hv) { tip.hidden = true; return; }
    const svg = box.querySelector('svg');
    const r = svg.getBoundingClientRect();
    const px = (ev.clientX - r.left) * hv.W / r.width;
    const x = hv.x0 + (px - hv.m.l) / (hv.W - hv.m.l - hv.m.r) * (hv.x1 - hv.x0);
    hv.dots.innerHTML = '';
    const rows = [];
    let at = null;
    for (const l of hv.lines) {
      if (l.shown.length === 0) continue;
      const p = nearest(l.shown, x);
      if (at === null || Math.abs(p[0] - x) < Math.abs(at - x)) at = p[0];
      rows.push([l, p]);
    }
    if (at === null) { tip.hidden = true; return; }
    hv.cursor.setAttribute('x1', hv.sx(at));
    hv.cursor.setAttribute('x2', hv.sx(at));
    hv.cursor.setAttribute('visibility', 'visible');
    tip.innerHTML = '';
    tip.appendChild(h('div', {}, (state.x === 'tokens' ? 'tokens ' : 'update ') + fmt(at)));
    for (const [l, p] of rows) {
      el('circle', { cx: hv.sx(p[0]), cy: hv.sy(p[1]), r: 3.5, fill: 'none', stroke: l.color, 'stroke-width': 1.5 }, hv.dots);
      const row = h('div');
      const sw = h('span', { class: 'swatch' });
      sw.style.background = l.color;
      row.appendChild(sw);
      row.appendChild(document.createTextNode(`${l.run} · ${l.label}: ${fmt(p[1])}` + (p[0] !== at ? ` (at ${fmt(p[0])})` : '')));
      tip.appendChild(row);
    }
    tip.hidden = false;
    tip.style.left = Math.min(ev.clientX + 14, window.innerWidth - tip.offsetWidth - 8) + 'px';
    tip.style.top = (ev.clientY + 14) + 'px';
  }

  function unhover(box) {
    document.getElementById('tooltip').hidden = true;
    if (box._hover) {
      box._hover.cursor.setAttribute('visibility', 'hidden');
      box._hover.dots.innerHTML = '';
    }
  }

  function buildCharts() {
    const root = document.getElementById('charts');
    for (const c of charts) {
      const box = h('div', { class: 'chart', 'data-chart': c.id });
      const title = h('div', { class: 'title' });
      title.appendChild(h('span', {}, c.title));
      const lab = h('label', {}, ' log y');
      const cb = h('input', { type: 'checkbox', class: 'log', 'data-chart': c.id });
      cb.checked = state.log[c.id];
      cb.addEventListener('change', () => { state.log[c.id] = cb.checked; redraw(); });
      lab.prepend(cb);
      title.appendChild(lab);
      box.appendChild(title);
      const svg = el('svg', { 'data-chart': c.id, preserveAspectRatio: 'none' });
      svg.addEventListener('mousemove', (ev) => hover(box, ev));
      svg.addEventListener('mouseleave', () => unhover(box));
      box.appendChild(svg);
      box.appendChild(h('div', { class: 'legend' }));
      root.appendChild(box);
    }
  }

  let pending = false;
  function redraw() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      for (const c of charts) drawChart(c, document.querySelector(`.chart[data-chart="${c.id}"]`));
      renderDiffer();
      let n = 0;
      for (const name of tickedNames()) n += (state.data.get(name) || { records: [] }).records.length;
      document.body.dataset.records = n;
    });
  }

  // ---- the runs table --------------------------------------------------

  const tickedNames = () => state.runs.map((r) => r.name).filter((n) => state.ticked.has(n));

  function renderRuns() {
    const tb = document.querySelector('#runs tbody');
    tb.innerHTML = '';
    for (const r of state.runs) {
      const tr = h('tr', { 'data-run': r.name, 'data-status': r.status });
      const td = (text, cls) => { const c = h('td', cls ? { class: cls } : {}, text); tr.appendChild(c); return c; };
      const cb = h('input', { type: 'checkbox', class: 'tick', 'data-run': r.name });
      cb.checked = state.ticked.has(r.name);
      cb.addEventListener('change', () => setTicked(r.name, cb.checked));
      td('').appendChild(cb);
      const nameCell = td('', 'name');
      const sw = h('span', { class: 'swatch' });
      sw.style.background = runColor(r.name);
      nameCell.appendChild(sw);
      const a = h('a', { title: 'show summary and settings' }, r.name);
      a.addEventListener('click', () => showRun(r.name));
      nameCell.appendChild(a);
      td(r.model || '—', 'model');
      td(r.head || '—');
      td(r.seed || '—');
      const st = td(r.status, 'status-' + r.status);
      if (r.status_detail) st.title = r.status_detail;
      td(r.steps ? `${r.updates} / ${r.steps}` : String(r.updates), 'num');
      td(fmt(r.tokens), 'num');
      td(r.tokens_per_s ? Math.round(r.tokens_per_s).toString() : '—', 'num');
      td(num(r.loss) ? r.loss.toFixed(4) : '—', 'num');
      td(num(r.val_loss) ? r.val_loss.toFixed(4) : '—', 'num');
      td(fmt(r.diameter), 'num');
      td(fmt(r.hilbert_rms), 'num');
      tb.appendChild(tr);
    }
    document.getElementById('no-runs').hidden = state.runs.length > 0;
    document.getElementById('tick-all').checked = state.runs.length > 0 && state.runs.every((r) => state.ticked.has(r.name));
  }

  function renderComparisons(comps) {
    const box = document.getElementById('comparisons');
    box.innerHTML = '';
    for (const c of comps) {
      const p = h('div', { class: 'comparison', 'data-comparison': c.name });
      p.appendChild(document.createTextNode('hilbert compare report ' + (c.name || '(this folder)') + ': '));
      const open = h('button', { class: 'open-report' }, 'show compare.md');
      open.addEventListener('click', () => showCompare(c.name));
      p.appendChild(open);
      const tick = h('button', { class: 'tick-runs' }, `tick its ${c.runs.length} runs`);
      tick.addEventListener('click', () => { for (const n of c.runs) state.ticked.add(n); syncTicks(); });
      p.appendChild(tick);
      box.appendChild(p);
    }
  }

  function setTicked(name, on) {
    if (on) state.ticked.add(name); else state.ticked.delete(name);
    syncTicks();
  }

  function syncTicks() {
    for (const cb of document.querySelectorAll('input.tick')) cb.checked = state.ticked.has(cb.dataset.run);
    document.getElementById('tick-all').checked = state.runs.length > 0 && state.runs.every((r) => state.ticked.has(r.name));
    updateURL();
    pollMetrics();
    redraw();
  }

  function updateURL() {
    const q = new URLSearchParams(location.search);
    const t = tickedNames();
    if (t.length) q.set('tick', t.join(',')); else q.delete('tick');
    if (state.x === 'tokens') q.set('x', 'tokens'); else q.delete('x');
    if (state.smoothing > 0) q.set('smooth', state.smoothing); else q.delete('smooth');
    history.replaceState(null, '', location.pathname + (q.toString() ? '?' + q : ''));
  }

  // ---- settings that differ --------------------------------------------

  function renderDiffer() {
    const box = document.getElementById('differ');
    box.innerHTML = '';
    const runs = tickedNames().map((n) => state.byName.get(n)).filter(Boolean);
    if (runs.length < 2) {
      box.appendChild(h('p', { class: 'note' }, 'Tick two or more runs to see the settings in which they differ.'));
      return;
    }
    const keys = new Set();
    for (const r of runs) for (const k in r.settings || {}) keys.add(k);
    const differ = [...keys].sort().filter((k) => new Set(runs.map((r) => (r.settings || {})[k])).size > 1);
    const without = runs.filter((r) => !r.settings).map((r) => r.name);
    if (without.length) box.appendChild(h('p', { class: 'note' }, `No settings yet for ${without.join(', ')}: a run's settings are read from its latest checkpoint.`));
    if (differ.length === 0) {
      box.appendChild(h('p', { id: 'no-differ' }, `The ${runs.length} ticked runs have the same settings.`));
      return;
    }
    const t = h('table', { id: 'differ-table' });
    const head = h('tr');
    head.appendChild(h('th', {}, 'setting'));
    for (const r of runs) head.appendChild(h('th', {}, r.name));
    t.appendChild(head);
    for (const k of differ) {
      const tr = h('tr', { 'data-setting': k });
      tr.appendChild(h('td', {}, k));
      for (const r of runs) tr.appendChild(h('td', {}, (r.settings || {})[k] ?? '—'));
      t.appendChild(tr);
    }
    box.appendChild(t);
  }

  // ---- summary, settings and compare.md --------------------------------

  const encodeName = (n) => n.split('/').map(encodeURIComponent).join('/');

  async function getJSON(url) {
    const res = await fetch(url, { cache: 'no-store' });
    const body = await res.json();
    if (!res.ok) throw new Error(body.error || res.statusText);
    return body;
  }

  async function showRun(name) {
    state.detail = { kind: 'run', name };
    const r = state.byName.get(name);
    const box = document.getElementById('detail');
    box.hidden = false;
    box.innerHTML = '';
    box.dataset.run = name;
    if (!r.has_summary) box.appendChild(h('h2', {}, 'Run ' + name)); // summary.md has its own title
    box.appendChild(h('p', { class: 'status-' + r.status }, `${name}: ${r.status}${r.status_detail ? ' (' + r.status_detail + ')' : ''}`));
    box.scrollIntoView({ block: 'start' });
    if (r.command) {
      const p = h('p', {}, 'command: ');
      p.appendChild(h('span', { class: 'cmd' }, r.command));
      box.appendChild(p);
    }
    for (const w of r.warnings || []) box.appendChild(h('p', { class: 'warn' }, w));
    const sum = h('div', { class: 'summary' });
    box.appendChild(sum);
    if (r.has_summary) {
      try {
        const doc = await getJSON(`/api/runs/${encodeName(name)}/summary`);
        sum.innerHTML = doc.html; // rendered and escaped by the server
      } catch (e) {
        sum.appendChild(h('p', { class: 'warn' }, 'summary.md: ' + e.message));
      }
    } else {
      sum.appendChild(h('p', { class: 'note' }, 'No summary.md yet: train writes it when the run ends or is interrupted.'));
    }
    box.appendChild(h('h2', {}, 'Settings (latest checkpoint)'));
    if (r.settings) {
      const t = h('table', { class: 'settings' });
      for (const k of Object.keys(r.settings).sort()) {
        const tr = h('tr');
        tr.appendChild(h('td', {}, k));
        tr.appendChild(h('td', {}, r.settings[k]));
        t.appendChild(tr);
      }
      box.appendChild(t);
    } else {
      box.appendChild(h('p', { class: 'note' }, 'No checkpoint yet.'));
    }
  }

  async function showCompare(name) {
    state.detail = { kind: 'compare', name };
    const box = document.getElementById('detail');
    box.hidden = false;
    box.innerHTML = '';
    box.dataset.run = '';
    box.dataset.comparison = name;
    box.scrollIntoView({ block: 'start' });
    try {
      const doc = await getJSON('/api/compare/' + encodeName(name));
      const div = h('div', { class: 'report' });
      div.innerHTML = doc.html; // rendered and escaped by the server
      box.appendChild(div);
    } catch (e) {
      box.appendChild(h('p', { class: 'warn' }, 'compare.md: ' + e.message));
    }
  }

  // ---- polling ---------------------------------------------------------

  async function list() {
    const l = await getJSON('/api/runs');
    state.runs = l.runs;
    state.byName = new Map(l.runs.map((r) => [r.name, r]));
    for (const r of l.runs) if (!colorIndex.has(r.name)) colorIndex.set(r.name, colorIndex.size);
    document.getElementById('dir').textContent = l.dir;
    renderRuns();
    renderComparisons(l.comparisons);
    document.body.dataset.ready = '1';
    redraw();
  }

  let polling = null;
  function pollMetrics() {
    if (!polling) polling = pollAll().finally(() => { polling = null; });
    return polling;
  }

  async function pollAll() {
    let changed = false;
    for (const name of tickedNames()) {
      let d = state.data.get(name);
      if (!d) { d = { offset: 0, step: -1, records: [] }; state.data.set(name, d); changed = true; }
      for (;;) {
        const q = `from=${d.offset}` + (d.step >= 0 ? `&step=${d.step}` : '');
        const m = await getJSON(`/api/runs/${encodeName(name)}/metrics?${q}`);
        if (m.reset) { d.records = []; changed = true; }
        for (const raw of m.records) d.records.push(raw);
        if (m.records.length) { d.step = m.records[m.records.length - 1].step; changed = true; }
        d.offset = m.offset;
        if (!m.more) break;
      }
    }
    if (changed) redraw();
  }

  let polls = 0;
  async function loop() {
    try {
      if (polls % listEvery === 0) await list();
      await pollMetrics();
      document.getElementById('live').textContent = state.runs.some((r) => r.status === 'running') ? '● live' : '';
    } catch (e) {
      document.getElementById('live').textContent = 'server unreachable: ' + e.message;
    }
    polls++;
    setTimeout(loop, pollMs);
  }

  // ---- controls --------------------------------------------------------

  document.getElementById('xaxis').value = state.x;
  document.getElementById('xaxis').addEventListener('change', (ev) => { state.x = ev.target.value; updateURL(); redraw(); });
  const sm = document.getElementById('smoothing');
  sm.value = state.smoothing;
  document.getElementById('smoothing-value').textContent = state.smoothing;
  sm.addEventListener('input', () => {
    state.smoothing = Number(sm.value);
    document.getElementById('smoothing-value').textContent = sm.value;
    updateURL();
    redraw();
  });
  document.getElementById('tick-all').addEventListener('change', (ev) => {
    for (const r of state.runs) if (ev.target.checked) state.ticked.add(r.name); else state.ticked.delete(r.name);
    syncTicks();
  });
  window.addEventListener('resize', redraw);

  buildCharts();
  redraw();
  loop();
})();
