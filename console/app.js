// Nereid's web console: one script, no build step, no dependencies. Every action is a call to the server's own
// HTTP API (/v2/...), so the restricted-API rules and the cross-site check apply to it as to any client; the
// /console/api/ endpoints only read (config text, recent logs, latency percentiles). Server data reaches the page
// through textContent only, never as HTML.
'use strict';

const state = {
  server: { model_control_mode: 'none', logs_kept: 0 },
  timers: [],
  auth: JSON.parse(sessionStorage.getItem('nereid-auth') || 'null'),
};

// ---------- small helpers ----------

/** Builds an element: h('td', { class: 'x', onclick: fn }, 'text', child). */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    // Through the CSSOM: the page's Content-Security-Policy refuses style attributes.
    else if (k === 'style') el.style.cssText = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function toast(message, bad) {
  const t = document.getElementById('toast');
  t.textContent = message;
  t.className = bad ? 'bad' : '';
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => (t.hidden = true), bad ? 8000 : 3000);
}

/** fetch with the restricted-API header; throws Error(server's message) on a non-2xx answer. */
async function api(path, opts = {}) {
  const headers = new Headers(opts.headers || {});
  if (state.auth && state.auth.name) headers.set(state.auth.name, state.auth.value);
  const res = await fetch(path, { ...opts, headers });
  if (!res.ok) {
    let msg = `${res.status} ${res.statusText}`;
    try {
      const body = await res.json();
      if (body && body.error) msg = body.error;
    } catch {
      // not JSON: keep the status line
    }
    const err = new Error(msg);
    err.status = res.status;
    throw err;
  }
  return res;
}
const getJson = async (path) => (await api(path)).json();
const postJson = async (path, body) =>
  (
    await api(path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) })
  ).json();

function every(ms, fn) {
  fn();
  state.timers.push(setInterval(fn, ms));
}

function stateClass(s) {
  return `pill state-${s || 'UNLOADED'}`;
}

// ---------- pages ----------

const pages = { models: modelsPage, model: modelPage, infer: inferPage, live: livePage, logs: logsPage };

function route() {
  for (const t of state.timers) clearInterval(t);
  state.timers = [];
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  let name = parts[0] || 'models';
  if (name === 'models' && parts[1]) name = 'model';
  document.querySelectorAll('nav a').forEach((a) => {
    a.classList.toggle('active', a.dataset.page === (name === 'model' ? 'models' : name));
  });
  const main = document.getElementById('page');
  main.replaceChildren();
  const page = pages[name] || modelsPage;
  Promise.resolve(page(main, parts.slice(1))).catch((err) => main.append(h('p', { class: 'error' }, err.message)));
}

async function loadOrUnload(model, action) {
  try {
    await postJson(`/v2/repository/models/${encodeURIComponent(model)}/${action}`, {});
    toast(`${action === 'load' ? 'Loaded' : 'Unloaded'} '${model}'`);
  } catch (err) {
    toast(`${action} '${model}' failed: ${err.message}`, true);
  }
  route();
}

function controlButtons(row) {
  if (state.server.model_control_mode !== 'explicit') return null;
  const loaded = row.state === 'READY' || row.state === 'UNAVAILABLE';
  return h(
    'span',
    { class: 'row' },
    h('button', { type: 'button', onclick: () => loadOrUnload(row.name, 'load') }, loaded ? 'Reload' : 'Load'),
    loaded ? h('button', { type: 'button', onclick: () => loadOrUnload(row.name, 'unload') }, 'Unload') : null,
  );
}

async function modelsPage(main) {
  const rows = await postJson('/v2/repository/index', {});
  const explicit = state.server.model_control_mode === 'explicit';
  main.append(
    h('h1', {}, 'Models'),
    h(
      'p',
      { class: 'muted' },
      `Model control mode: ${state.server.model_control_mode}.`,
      explicit
        ? ' Models can be loaded and unloaded here.'
        : ' Start with --model-control-mode=explicit to load and unload from here.',
    ),
    h(
      'div',
      { class: 'panel' },
      h(
        'table',
        { id: 'models-table' },
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            h('th', {}, 'Model'),
            h('th', {}, 'Version'),
            h('th', {}, 'Status'),
            h('th', {}, 'Reason'),
            explicit ? h('th', {}, '') : null,
          ),
        ),
        h(
          'tbody',
          {},
          rows.length === 0
            ? h('tr', {}, h('td', { colspan: 5, class: 'muted' }, 'No models in the repository.'))
            : null,
          rows.map((r) =>
            h(
              'tr',
              { 'data-model': r.name },
              h('td', {}, h('a', { href: `#/models/${encodeURIComponent(r.name)}` }, r.name)),
              h('td', {}, r.version || '–'),
              h('td', {}, h('span', { class: stateClass(r.state) }, r.state || 'UNLOADED')),
              h('td', { class: 'reason' }, r.reason),
              explicit ? h('td', {}, controlButtons(r)) : null,
            ),
          ),
        ),
      ),
    ),
  );
}

function tensorTable(title, tensors) {
  return h(
    'div',
    {},
    h('h2', {}, title),
    h(
      'table',
      {},
      h('thead', {}, h('tr', {}, h('th', {}, 'Name'), h('th', {}, 'Datatype'), h('th', {}, 'Shape'))),
      h(
        'tbody',
        {},
        tensors.map((t) =>
          h(
            'tr',
            {},
            h('td', { class: 'mono' }, t.name),
            h('td', {}, t.datatype),
            h('td', { class: 'mono' }, `[${t.shape.join(', ')}]`),
          ),
        ),
      ),
    ),
  );
}

async function modelPage(main, [name]) {
  const rows = (await postJson('/v2/repository/index', {})).filter((r) => r.name === name);
  main.append(
    h('p', {}, h('a', { href: '#/models' }, '← Models')),
    h('h1', {}, name),
    controlButtons(rows[0] || { name, state: '' }) || '',
  );
  const versions = h(
    'div',
    { class: 'panel' },
    h('h2', { style: 'margin-top:0' }, 'Versions'),
    h(
      'table',
      {},
      h('thead', {}, h('tr', {}, h('th', {}, 'Version'), h('th', {}, 'Status'), h('th', {}, 'Reason'))),
      h(
        'tbody',
        {},
        rows.map((r) =>
          h(
            'tr',
            {},
            h('td', {}, r.version || '–'),
            h('td', {}, h('span', { class: stateClass(r.state) }, r.state || 'UNLOADED')),
            h('td', { class: 'reason' }, r.reason),
          ),
        ),
      ),
    ),
  );
  main.append(versions);
  const tune = await tunePanel(name);
  if (tune) main.append(tune);
  const ready = rows.some((r) => r.state === 'READY');
  if (ready) {
    const meta = await getJson(`/v2/models/${encodeURIComponent(name)}`);
    main.append(
      h(
        'div',
        { class: 'panel', id: 'metadata' },
        h(
          'div',
          { class: 'row' },
          h('span', {}, 'Platform: ', h('b', {}, meta.platform)),
          h('span', {}, 'Versions: ', meta.versions.join(', ')),
          h('a', { href: `#/infer/${encodeURIComponent(name)}` }, 'Try it →'),
        ),
        h('div', { class: 'grid' }, tensorTable('Inputs', meta.inputs), tensorTable('Outputs', meta.outputs)),
      ),
    );
    const text = await (await api(`/console/api/models/${encodeURIComponent(name)}/config.pbtxt`)).text();
    main.append(
      h(
        'div',
        { class: 'panel' },
        h(
          'h2',
          { style: 'margin-top:0' },
          'config.pbtxt ',
          h('span', { class: 'muted' }, '(as loaded, after auto-complete)'),
        ),
        h('pre', { id: 'config-text' }, text),
      ),
    );
  }
}

/** The report `nereid tune --write` left in the model's folder, read-only; nothing when there is none. */
async function tunePanel(name) {
  let r;
  try {
    r = await getJson(`/console/api/models/${encodeURIComponent(name)}/tune`);
  } catch {
    return '';
  }
  const fixed = (v, d) => (typeof v === 'number' ? v.toFixed(d) : '–');
  const shown = (c) => c.best || [...c.points].sort((a, b) => b.throughput - a.throughput)[0];
  const note = (c) =>
    [
      c.label === (r.written && r.written.label) ? '★ written' : '',
      c.refused ? `refused: ${c.refused}` : '',
      c.failed ? `failed: ${c.failed}` : '',
    ]
      .filter(Boolean)
      .join('; ');
  const rows = r.candidates.map((c, i) => {
    const p = shown(c);
    return h(
      'tr',
      {},
      h('td', {}, String(i + 1)),
      h('td', {}, c.label),
      h('td', {}, p ? String(p.concurrency) : '–'),
      h('td', {}, fixed(p && p.throughput, 1)),
      h('td', {}, fixed(p && p.p50Ms, 2)),
      h('td', {}, fixed(p && p.p99Ms, 2)),
      h('td', { class: 'reason' }, note(c)),
    );
  });
  const head = ['#', 'config', 'conc', 'infer/s', 'p50 ms', 'p99 ms', 'note'].map((t) => h('th', {}, t));
  return h(
    'div',
    { class: 'panel', id: 'tune-report' },
    h(
      'h2',
      { style: 'margin-top:0' },
      'Tune report ',
      h('span', { class: 'muted' }, '(nereid tune --write, read-only)'),
    ),
    h(
      'p',
      {},
      `${r.startedAt} on ${r.machine.host} (${r.machine.cores} cores); ${r.mode} search, objective ${r.objective}. `,
      r.written ? h('b', {}, `Written: ${r.written.label} — ${r.written.reason}.`) : r.noneMet ? r.noneMet.message : '',
    ),
    h('table', {}, h('thead', {}, h('tr', {}, head)), h('tbody', {}, rows)),
    r.unexplored.length ? h('p', { class: 'muted' }, `Not explored (time budget): ${r.unexplored.join('; ')}`) : '',
  );
}

// ---------- try it ----------

const BYTES_PER = {
  BOOL: 1,
  UINT8: 1,
  INT8: 1,
  UINT16: 2,
  INT16: 2,
  FP16: 2,
  BF16: 2,
  UINT32: 4,
  INT32: 4,
  FP32: 4,
  UINT64: 8,
  INT64: 8,
  FP64: 8,
};

function concreteShape(shape) {
  return shape.map((d) => (d < 0 ? 1 : d));
}

function sampleData(datatype, count) {
  if (datatype === 'BYTES') return Array.from({ length: count }, () => 'hello');
  if (datatype === 'BOOL') return Array.from({ length: count }, () => false);
  return Array.from({ length: count }, (_, i) =>
    datatype.startsWith('FP') || datatype === 'BF16' ? Number((i / count).toFixed(3)) : i,
  );
}

function parseShape(text) {
  const dims = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (dims.some((d) => !/^-?[0-9]+$/.test(d))) throw new Error(`shape '${text}' must be comma-separated integers`);
  return dims.map(Number);
}

/** A file as one input: BYTES → one element holding the file; numbers → the file's raw little-endian values. */
function fileTensor(input, shape, bytes) {
  if (input.datatype === 'BYTES') {
    const blob = new Uint8Array(4 + bytes.length);
    new DataView(blob.buffer).setUint32(0, bytes.length, true);
    blob.set(bytes, 4);
    const n = shape.reduce((a, b) => a * Math.max(b, 1), 1);
    if (n !== 1)
      throw new Error(`input '${input.name}': a file fills one BYTES element, but shape [${shape}] has ${n}`);
    return { shape: shape.map((d) => Math.max(d, 1)), blob };
  }
  const size = BYTES_PER[input.datatype];
  if (bytes.length % size !== 0)
    throw new Error(`input '${input.name}': ${bytes.length} bytes is not a whole number of ${input.datatype} values`);
  const count = bytes.length / size;
  const known = shape.filter((d) => d >= 0).reduce((a, b) => a * b, 1);
  const free = shape.filter((d) => d < 0).length;
  const dims = shape.map((d) => (d < 0 ? (free === 1 ? count / known : 1) : d));
  if (dims.reduce((a, b) => a * b, 1) !== count)
    throw new Error(`input '${input.name}': ${count} values do not fill shape [${shape}]`);
  return { shape: dims, blob: bytes };
}

async function inferPage(main, [chosen]) {
  const index = await postJson('/v2/repository/index', { ready: true });
  const names = [...new Set(index.map((r) => r.name))];
  main.append(h('h1', {}, 'Try it'));
  if (names.length === 0) {
    main.append(h('p', { class: 'muted' }, 'No model is ready.'));
    return;
  }
  const model = names.includes(chosen) ? chosen : names[0];
  const select = h(
    'select',
    { id: 'infer-model', onchange: (e) => (location.hash = `#/infer/${encodeURIComponent(e.target.value)}`) },
    names.map((n) => h('option', { value: n, selected: n === model }, n)),
  );
  main.append(h('div', { class: 'row' }, h('label', {}, 'Model ', select)));
  const meta = await getJson(`/v2/models/${encodeURIComponent(model)}`);
  const form = h('div', { class: 'panel', id: 'infer-form' });
  const fields = meta.inputs.map((input) => {
    const shape = concreteShape(input.shape);
    const count = shape.reduce((a, b) => a * b, 1);
    const shapeInput = h('input', { class: 'mono', value: shape.join(','), size: 14, 'data-shape': input.name });
    const data = h(
      'textarea',
      { 'data-input': input.name, rows: 3 },
      JSON.stringify(sampleData(input.datatype, count)),
    );
    const file = h('input', { type: 'file', 'data-file': input.name });
    form.append(
      h(
        'div',
        { class: 'input-card' },
        h(
          'div',
          { class: 'row' },
          h('b', { class: 'mono' }, input.name),
          h('span', { class: 'muted' }, `${input.datatype} [${input.shape.join(', ')}]`),
          h('label', { class: 'row' }, 'shape ', shapeInput),
          h('label', { class: 'row' }, 'or a file ', file),
        ),
        data,
      ),
    );
    return { input, shapeInput, data, file };
  });
  const outs = meta.outputs.map((o) => {
    const on = h('input', { type: 'checkbox', checked: true, 'data-output': o.name });
    const k = h('input', {
      type: 'number',
      min: 0,
      value: 0,
      style: 'width:5em',
      'data-class-count': o.name,
      title: 'classification: top k with labels (0 = raw values)',
    });
    form.append(
      h(
        'div',
        { class: 'row input-card' },
        h('label', { class: 'row' }, on, h('b', { class: 'mono' }, o.name)),
        h('span', { class: 'muted' }, `${o.datatype} [${o.shape.join(', ')}]`),
        h('label', { class: 'row' }, 'top-k classes ', k),
      ),
    );
    return { output: o, on, k };
  });
  const result = h('div', { id: 'infer-result' });
  const run = h('button', { class: 'primary', type: 'button', id: 'infer-run' }, 'Run inference');
  run.addEventListener('click', () => runInfer(model, fields, outs, result, run));
  form.append(
    h('div', { class: 'row input-card' }, run, h('span', { class: 'muted' }, `POST /v2/models/${model}/infer`)),
  );
  main.append(form, result);
}

async function runInfer(model, fields, outs, result, button) {
  button.disabled = true;
  result.replaceChildren();
  try {
    const inputs = [];
    const blobs = [];
    for (const f of fields) {
      const shape = parseShape(f.shapeInput.value);
      const file = f.file.files && f.file.files[0];
      if (file) {
        const t = fileTensor(f.input, shape, new Uint8Array(await file.arrayBuffer()));
        inputs.push({
          name: f.input.name,
          datatype: f.input.datatype,
          shape: t.shape,
          parameters: { binary_data_size: t.blob.length },
        });
        blobs.push(t.blob);
      } else {
        let data;
        try {
          data = JSON.parse(f.data.value);
        } catch (err) {
          throw new Error(`input '${f.input.name}': not JSON (${err.message})`);
        }
        inputs.push({
          name: f.input.name,
          datatype: f.input.datatype,
          shape,
          data: Array.isArray(data) ? data.flat(Infinity) : [data],
        });
      }
    }
    const outputs = outs
      .filter((o) => o.on.checked)
      .map((o) => ({
        name: o.output.name,
        parameters: Number(o.k.value) > 0 ? { classification: Number(o.k.value) } : {},
      }));
    const header = new TextEncoder().encode(JSON.stringify({ inputs, outputs }));
    const headers = { 'Content-Type': blobs.length > 0 ? 'application/octet-stream' : 'application/json' };
    if (blobs.length > 0) headers['Inference-Header-Content-Length'] = String(header.length);
    const started = performance.now();
    const res = await api(`/v2/models/${encodeURIComponent(model)}/infer`, {
      method: 'POST',
      headers,
      body: new Blob([header, ...blobs]),
    });
    const body = await res.json();
    const ms = performance.now() - started;
    result.append(h('p', { class: 'muted' }, `Answered in ${ms.toFixed(1)} ms by version ${body.model_version}.`));
    for (const o of body.outputs) result.append(outputView(o));
  } catch (err) {
    result.append(h('p', { class: 'error' }, err.message));
  } finally {
    button.disabled = false;
  }
}

function outputView(o) {
  const panel = h(
    'div',
    { class: 'panel output', 'data-output-name': o.name },
    h(
      'h2',
      { style: 'margin-top:0' },
      h('span', { class: 'mono' }, o.name),
      ' ',
      h('span', { class: 'muted' }, `${o.datatype} [${o.shape.join(', ')}]`),
    ),
  );
  const classes =
    o.datatype === 'BYTES' && o.data.every((s) => typeof s === 'string' && /^[^:]+:[0-9]+(:.*)?$/.test(s));
  if (classes) {
    panel.append(
      h(
        'table',
        { class: 'classes' },
        h('thead', {}, h('tr', {}, h('th', {}, 'Score'), h('th', {}, 'Index'), h('th', {}, 'Label'))),
        h(
          'tbody',
          {},
          o.data.map((s) => {
            const [score, idx, ...label] = s.split(':');
            return h(
              'tr',
              {},
              h('td', { class: 'mono' }, Number(score).toFixed(4)),
              h('td', {}, idx),
              h('td', {}, label.join(':')),
            );
          }),
        ),
      ),
    );
  } else {
    const text = JSON.stringify(o.data);
    panel.append(h('pre', {}, text.length > 4000 ? `${text.slice(0, 4000)}… (${o.data.length} values)` : text));
  }
  return panel;
}

// ---------- live charts ----------

const COLORS = ['#1f6feb', '#e8590c', '#2f9e44', '#ae3ec9', '#f08c00', '#0c8599', '#c2255c'];
const POINTS = 60;

/** A line chart on a canvas, drawn by hand: series of numbers over the last POINTS ticks. */
function drawLines(canvas, series, unit) {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth;
  const hgt = canvas.clientHeight;
  canvas.width = w * dpr;
  canvas.height = hgt * dpr;
  const g = canvas.getContext('2d');
  g.scale(dpr, dpr);
  const css = getComputedStyle(document.body);
  const left = 56;
  const bottom = 20;
  // An idle chart still gets a readable axis (0 … 1) rather than a tower of zeros.
  const max = Math.max(1, ...series.flatMap((s) => s.values.filter((v) => Number.isFinite(v))));
  const top = niceCeil(max);
  g.font = '11px system-ui, sans-serif';
  g.fillStyle = css.getPropertyValue('--muted');
  g.strokeStyle = css.getPropertyValue('--line');
  g.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const y = 6 + ((hgt - bottom - 6) * i) / 4;
    g.beginPath();
    g.moveTo(left, y);
    g.lineTo(w - 4, y);
    g.stroke();
    g.fillText(formatNumber(top * (1 - i / 4)) + unit, 2, y + 4);
  }
  g.fillText(`${POINTS} s`, left, hgt - 4);
  g.fillText('now', w - 26, hgt - 4);
  const x = (i) => left + ((w - 4 - left) * i) / (POINTS - 1);
  const y = (v) => 6 + (hgt - bottom - 6) * (1 - v / top);
  series.forEach((s) => {
    g.strokeStyle = s.color;
    g.lineWidth = 2;
    g.beginPath();
    let pen = false;
    const offset = POINTS - s.values.length;
    s.values.forEach((v, i) => {
      if (!Number.isFinite(v)) {
        pen = false;
        return;
      }
      if (pen) g.lineTo(x(i + offset), y(v));
      else g.moveTo(x(i + offset), y(v));
      pen = true;
    });
    g.stroke();
  });
}

/** Bars: executions per batch size. */
function drawBars(canvas, bars) {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth;
  const hgt = canvas.clientHeight;
  canvas.width = w * dpr;
  canvas.height = hgt * dpr;
  const g = canvas.getContext('2d');
  g.scale(dpr, dpr);
  const css = getComputedStyle(document.body);
  g.font = '11px system-ui, sans-serif';
  g.fillStyle = css.getPropertyValue('--muted');
  if (bars.length === 0) {
    g.fillText('no batches executed yet', 10, hgt / 2);
    return;
  }
  const max = Math.max(...bars.map((b) => b.count));
  const slot = Math.min(90, (w - 20) / bars.length);
  bars.forEach((b, i) => {
    const bh = ((hgt - 40) * b.count) / max;
    g.fillStyle = COLORS[0];
    g.fillRect(10 + i * slot + slot * 0.15, hgt - 20 - bh, slot * 0.7, bh);
    g.fillStyle = css.getPropertyValue('--muted');
    g.fillText(String(b.size), 10 + i * slot + slot * 0.45, hgt - 6);
    g.fillText(formatNumber(b.count), 10 + i * slot + slot * 0.3, hgt - 24 - bh);
  });
}

function niceCeil(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function formatNumber(v) {
  if (v >= 1e6) return `${(v / 1e6).toFixed(1)}M`;
  if (v >= 1e3) return `${(v / 1e3).toFixed(1)}k`;
  if (Number.isInteger(v)) return v.toFixed(0);
  if (v >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

function chartPanel(id, title, legend) {
  return h(
    'div',
    { class: 'panel chart' },
    h('h2', {}, title),
    h('canvas', { id }),
    h('div', { class: 'legend', id: `${id}-legend` }, legend || null),
  );
}

function setLegend(id, series) {
  document
    .getElementById(`${id}-legend`)
    .replaceChildren(...series.map((s) => h('span', {}, h('i', { style: `background:${s.color}` }), s.name)));
}

/** Sums the statistics of every version of each model: { name → totals }. */
function totals(stats) {
  const out = new Map();
  for (const s of stats.model_stats) {
    const t = out.get(s.name) || {
      success: 0,
      queueNs: 0,
      queueCount: 0,
      inferences: 0,
      executions: 0,
      batches: new Map(),
    };
    t.success += Number(s.inference_stats.success.count);
    t.queueNs += Number(s.inference_stats.queue.ns);
    t.queueCount += Number(s.inference_stats.queue.count);
    t.inferences += Number(s.inference_count);
    t.executions += Number(s.execution_count);
    for (const b of s.batch_stats || [])
      t.batches.set(Number(b.batch_size), (t.batches.get(Number(b.batch_size)) || 0) + Number(b.compute_infer.count));
    out.set(s.name, t);
  }
  return out;
}

async function livePage(main) {
  main.append(
    h('h1', {}, 'Live'),
    h(
      'p',
      { class: 'muted' },
      'From GET /v2/models/stats and the server’s per-request latencies, every second, for the last minute.',
    ),
    h(
      'div',
      { class: 'grid' },
      chartPanel('chart-rps', 'Requests / s'),
      chartPanel('chart-latency', 'Latency percentiles (all models)'),
      chartPanel('chart-queue', 'Mean queue time'),
      chartPanel('chart-batch', 'Executions by batch size (this minute)'),
    ),
  );
  const history = { rps: new Map(), p50: [], p90: [], p99: [], queue: new Map(), batches: [] };
  let last;
  const push = (arr, v) => {
    arr.push(v);
    if (arr.length > POINTS) arr.shift();
  };
  const tick = async () => {
    let stats;
    let lat;
    try {
      [stats, lat] = await Promise.all([getJson('/v2/models/stats'), getJson('/console/api/latency?window_ms=1000')]);
    } catch (err) {
      toast(`statistics: ${err.message}`, true);
      return;
    }
    const now = performance.now();
    const cur = totals(stats);
    if (last) {
      const dt = (now - last.at) / 1000;
      const batchDelta = new Map();
      for (const [name, t] of cur) {
        const p = last.totals.get(name) || { success: 0, queueNs: 0, queueCount: 0, batches: new Map() };
        if (!history.rps.has(name)) history.rps.set(name, []);
        if (!history.queue.has(name)) history.queue.set(name, []);
        push(history.rps.get(name), Math.max(0, (t.success - p.success) / dt));
        const qc = t.queueCount - p.queueCount;
        push(history.queue.get(name), qc > 0 ? (t.queueNs - p.queueNs) / qc / 1e6 : NaN);
        for (const [size, c] of t.batches)
          batchDelta.set(size, (batchDelta.get(size) || 0) + c - (p.batches.get(size) || 0));
      }
      push(history.batches, batchDelta);
      // Percentiles over every model's requests of the last second: the slowest model dominates p99, as a user sees it.
      const worst = (key) => (lat.models.length === 0 ? NaN : Math.max(...lat.models.map((m) => m[key])) / 1000);
      push(history.p50, worst('p50_us'));
      push(history.p90, worst('p90_us'));
      push(history.p99, worst('p99_us'));
    }
    last = { at: now, totals: cur };
    // Sorted, so a model keeps its color whatever order the statistics list it in.
    const names = [...history.rps.keys()].sort();
    const rps = names.map((n, i) => ({ name: n, color: COLORS[i % COLORS.length], values: history.rps.get(n) }));
    drawLines(document.getElementById('chart-rps'), rps, '');
    setLegend('chart-rps', rps);
    const latency = [
      { name: 'p50', color: COLORS[2], values: history.p50 },
      { name: 'p90', color: COLORS[4], values: history.p90 },
      { name: 'p99', color: COLORS[1], values: history.p99 },
    ];
    drawLines(document.getElementById('chart-latency'), latency, ' ms');
    setLegend('chart-latency', latency);
    const queue = names.map((n, i) => ({ name: n, color: COLORS[i % COLORS.length], values: history.queue.get(n) }));
    drawLines(document.getElementById('chart-queue'), queue, ' ms');
    setLegend('chart-queue', queue);
    const sum = new Map();
    for (const d of history.batches) for (const [size, c] of d) sum.set(size, (sum.get(size) || 0) + c);
    drawBars(
      document.getElementById('chart-batch'),
      [...sum]
        .filter(([, c]) => c > 0)
        .sort((a, b) => a[0] - b[0])
        .map(([size, count]) => ({ size, count })),
    );
  };
  every(1000, () => void tick());
}

// ---------- logs ----------

function clock(d) {
  const two = (n) => String(n).padStart(2, '0');
  return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}.${String(d.getMilliseconds()).padStart(3, '0')}`;
}

const LEVEL_NAMES = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
const HIDDEN = new Set(['level', 'time', 'pid', 'hostname', 'msg']);

async function logsPage(main) {
  main.append(h('h1', {}, 'Logs'));
  if (!state.server.logs_kept) {
    main.append(
      h('p', { class: 'muted' }, 'This server keeps no log lines for the console (it was embedded without one).'),
    );
    return;
  }
  const filter = h('input', { placeholder: 'filter', id: 'log-filter' });
  const level = h(
    'select',
    { id: 'log-level' },
    [10, 30, 40, 50].map((l) => h('option', { value: l, selected: l === 10 }, `${LEVEL_NAMES[l]} and above`)),
  );
  const body = h('tbody', {});
  main.append(
    h('p', { class: 'muted' }, `The server's last ${state.server.logs_kept} log lines, newest first.`),
    h('div', { class: 'row' }, filter, level),
    h(
      'div',
      { class: 'panel' },
      h(
        'table',
        { class: 'logs' },
        h(
          'thead',
          {},
          h('tr', {}, h('th', {}, 'Time'), h('th', {}, 'Level'), h('th', {}, 'Message'), h('th', {}, 'Fields')),
        ),
        body,
      ),
    ),
  );
  const lines = [];
  let after;
  const render = () => {
    const text = filter.value.toLowerCase();
    const min = Number(level.value);
    const shown = lines.filter((l) => l.level >= min && (!text || JSON.stringify(l).toLowerCase().includes(text)));
    body.replaceChildren(
      ...shown
        .slice()
        .reverse()
        .map((l) => {
          const fields = Object.entries(l)
            .filter(([k]) => !HIDDEN.has(k))
            .map(
              ([k, v]) =>
                `${k}=${typeof v === 'string' ? v : typeof v === 'number' ? Number(v.toFixed(3)) : JSON.stringify(v)}`,
            )
            .join(' ');
          const time = typeof l.time === 'number' ? clock(new Date(l.time)) : String(l.time);
          return h(
            'tr',
            { class: `lvl-${l.level}` },
            h('td', {}, time),
            h('td', {}, LEVEL_NAMES[l.level] || l.level),
            h('td', {}, l.msg || ''),
            h('td', {}, fields),
          );
        }),
    );
  };
  filter.addEventListener('input', render);
  level.addEventListener('change', render);
  const poll = async () => {
    try {
      const r = await getJson(`/console/api/logs${after === undefined ? '' : `?after=${after}`}`);
      after = r.next;
      if (r.lines.length === 0) return;
      lines.push(...r.lines);
      if (lines.length > state.server.logs_kept) lines.splice(0, lines.length - state.server.logs_kept);
      render();
    } catch (err) {
      toast(`logs: ${err.message}`, true);
    }
  };
  every(2000, () => void poll());
}

// ---------- start ----------

async function health() {
  const pill = document.getElementById('health');
  try {
    const res = await fetch('/v2/health/ready');
    pill.textContent = res.ok ? 'ready' : 'not ready';
    pill.className = `pill ${res.ok ? 'ok' : 'bad'}`;
  } catch {
    pill.textContent = 'unreachable';
    pill.className = 'pill bad';
  }
}

function settings() {
  const dialog = document.getElementById('settings');
  document.getElementById('settings-button').addEventListener('click', () => {
    document.getElementById('auth-name').value = (state.auth && state.auth.name) || '';
    document.getElementById('auth-value').value = (state.auth && state.auth.value) || '';
    dialog.showModal();
  });
  dialog.addEventListener('close', () => {
    if (dialog.returnValue === 'clear') state.auth = null;
    else if (dialog.returnValue === 'save') {
      const name = document.getElementById('auth-name').value.trim();
      state.auth = name ? { name, value: document.getElementById('auth-value').value } : null;
    } else return;
    if (state.auth) sessionStorage.setItem('nereid-auth', JSON.stringify(state.auth));
    else sessionStorage.removeItem('nereid-auth');
    route();
  });
}

async function start() {
  settings();
  try {
    state.server = await getJson('/console/api/server');
    document.getElementById('version').textContent = `v${state.server.version}`;
  } catch (err) {
    toast(`server: ${err.message}`, true);
  }
  setInterval(() => void health(), 5000);
  void health();
  window.addEventListener('hashchange', route);
  route();
}

void start();
