// ravel console: reads the service's documented API (GET /v1/streams, /v1/feature-streams,
// /v1/streams/{name}, .../path, POST .../model, .../history, /metrics, /readyz) every 2 s and
// draws what a person wants to see: health (readiness, missing topics, held partitions,
// refusals by reason, dead letters, lag) on the streams page and each stream's, streams, the
// coefficient path (original units or standardized) and the model at a point (a chart of its
// coefficients with their confidence intervals, and a table with standard errors, where the
// API gives them), the criterion curve along the path (EBIC / BIC / AIC, or
// CV on streams with fold statistics) with the point it chooses, the model over time with
// drift alarms, and feature streams; on streams that keep time buckets, a time range for the
// model and the path, and two windows' coefficients side by side. Charts are SVG drawn here, with ticks at round values;
// nothing is loaded from elsewhere. Writes (feature-stream labels) need the bearer token typed in;
// declaring a stream (a form with fields proposed from the topic's latest messages) the admin token.
'use strict';

const SVG_NS = 'http://www.w3.org/2000/svg';
const POLL_MS = 2000;
const PATH_METHODS = ['lasso', 'elastic-net', 'mcp', 'scad'];
// Model selection along the path (GET .../path?select=...): information criteria always,
// exact K-fold CV on streams that keep fold statistics (stream option cv.folds).
const CRITERIA = ['ebic', 'bic', 'aic', 'cv', 'cv_1se'];

const app = {
  token: sessionStorage.getItem('ravel.token') || '',
  view: null,          // the current view: {update(), dispose?()}
  timer: null,
  generation: 0,       // bumps on navigation; stale responses are dropped
  lastOk: null,        // time of the last successful poll
  rates: {},           // stream -> {n, t, rate} for rows/s
};

// ---- API --------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
  // The service is away (stopped, restarting, draining): keep the page, say so, retry.
  get away() {
    return this.status === 0 || this.code === 'shutting_down' || this.status === 502 || this.status === 504;
  }
}

// `token`: send this one instead of the typed-in token, on every method (the admin token of
// the declare page).
async function call(method, path, body, text, token) {
  const headers = {};
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (token) headers.Authorization = 'Bearer ' + token;
  else if (app.token && method !== 'GET') headers.Authorization = 'Bearer ' + app.token;
  let r;
  try {
    r = await fetch(path, {
      method, headers, cache: 'no-store',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new ApiError(0, 'unreachable', 'The service is not answering.');
  }
  const raw = await r.text();
  if (r.ok && text) return raw;
  let json = null;
  try { json = raw ? JSON.parse(raw) : null; } catch (e) { json = null; }
  if (!r.ok) {
    const e = json && json.error;
    throw new ApiError(r.status, e ? e.code : 'http_' + r.status,
      e ? e.message : method + ' ' + path + ' answered HTTP ' + r.status);
  }
  return json;
}
const get = (path) => call('GET', path);
const enc = encodeURIComponent;

// ---- DOM helpers ------------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'text') el.textContent = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}
function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v);
  }
  for (const c of children.flat()) if (c) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}
const $ = (sel, root) => (root || document).querySelector(sel);

function fmt(v, digits) {
  if (v === null || v === undefined || Number.isNaN(v)) return '—';
  if (typeof v !== 'number') return String(v);
  if (Number.isInteger(v) && Math.abs(v) < 1e15) return v.toLocaleString('en-US');
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(digits || 3);
  return v.toPrecision(digits || 4);
}
function age(ms) {
  if (!ms) return 'never';
  const sec = Math.max(0, (Date.now() - ms) / 1000);
  if (sec < 60) return sec.toFixed(0) + ' s ago';
  if (sec < 3600) return (sec / 60).toFixed(0) + ' min ago';
  return new Date(ms).toLocaleString();
}
function card(k, v, attrs) {
  return h('div', Object.assign({ class: 'card' }, attrs || {}), h('div', { class: 'k' }, k), h('div', { class: 'v' }, v));
}
function errorBox(e, extra) {
  return h('div', { class: 'error', role: 'alert', 'data-error': e.code || 'error' },
    h('strong', {}, 'Error '), e.code ? h('code', {}, e.code) : null, ': ', e.message, extra ? h('div', {}, extra) : null);
}
function colour(i) {
  // Distinct hues, stable per feature index.
  return 'hsl(' + ((i * 137.508) % 360).toFixed(1) + ' 65% 48%)';
}

// ---- banner and polling -----------------------------------------------------------------

function banner(text) {
  const b = $('#banner');
  if (text) { b.textContent = text; b.hidden = false; } else { b.textContent = ''; b.hidden = true; }
}

async function poll() {
  const gen = app.generation;
  if (!app.view) return;
  try {
    await app.view.update();
    if (gen !== app.generation) return;
    app.lastOk = new Date();
    banner('');
    $('#updated').textContent = 'Last update ' + app.lastOk.toLocaleTimeString() + '.';
  } catch (e) {
    if (gen !== app.generation) return;
    if (e instanceof ApiError && e.away) {
      const since = app.lastOk ? ' The data below is from ' + app.lastOk.toLocaleTimeString() + '.' : '';
      banner('The service is not answering (it may be restarting): retrying every ' + POLL_MS / 1000 + ' s.' + since);
    } else if (app.view.fail) {
      app.view.fail(e);
    } else {
      banner('Error: ' + (e.message || e));
    }
  }
}

function schedule() {
  clearTimeout(app.timer);
  const gen = app.generation;
  app.timer = setTimeout(async () => {
    await poll();
    if (gen === app.generation) schedule();
  }, POLL_MS);
}

// ---- routing ----------------------------------------------------------------------------

function route() {
  app.generation += 1;
  clearTimeout(app.timer);
  const main = $('#view');
  // Until a view has its first answer: never an empty page.
  main.replaceChildren(h('p', { class: 'muted', id: 'loading' }, 'Loading…'));
  const parts = location.hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  let view;
  if (parts.length === 0) view = streamsView(main);
  else if (parts[0] === 'streams' && parts.length === 2) view = streamView(main, parts[1]);
  else if (parts[0] === 'streams' && parts.length === 3 && parts[2] === 'history') view = historyView(main, parts[1]);
  else if (parts[0] === 'feature-streams' && parts.length === 2) view = featureView(main, parts[1]);
  else if (parts[0] === 'declare' && parts.length === 1) view = declareView(main);
  else {
    view = null;
    loaded();
    main.append(h('h1', {}, 'Unknown page'),
      errorBox({ code: 'unknown_page', message: 'The console has no page "' + location.hash + '".' }),
      h('p', {}, h('a', { href: '#/' }, 'Back to the streams')));
  }
  app.view = view;
  if (view) {
    main.setAttribute('data-view', view.name);
    poll().then(schedule);
  } else {
    main.setAttribute('data-view', 'unknown');
  }
}

// A stream the service does not have: say so, list the ones it has.
async function unknownStream(main, kind, name) {
  main.replaceChildren(h('h1', {}, name));
  let list = '';
  try {
    const [a, b] = await Promise.all([get('/v1/streams'), get('/v1/feature-streams')]);
    list = a.streams.map((x) => x.name).concat(b.feature_streams.map((x) => x.name)).join(', ');
  } catch (e) { list = ''; }
  main.append(errorBox({ code: 'unknown_stream', message: 'This service has no ' + kind + ' named "' + name + '".' }),
    h('p', {}, list ? 'Its streams: ' + list + '. ' : '', h('a', { href: '#/' }, 'Back to the streams')));
}

// ---- streams ----------------------------------------------------------------------------

function parseLag(metrics) {
  const lag = {};
  for (const line of metrics.split('\n')) {
    const m = /^ravel_consumer_lag\{([^}]*)\}\s+(\S+)/.exec(line);
    if (!m) continue;
    const t = /topic="([^"]*)"/.exec(m[1]);
    if (!t) continue;
    lag[t[1]] = (lag[t[1]] || 0) + Number(m[2]);
  }
  return lag;
}

function rate(name, n) {
  const now = Date.now();
  const r = app.rates[name];
  if (!r || n < r.n) { app.rates[name] = { n, t: now, rate: null }; return null; }
  if (now - r.t >= 1500) {
    r.rate = (n - r.n) / ((now - r.t) / 1000);
    r.n = n; r.t = now;
  }
  return r.rate;
}

function loaded() {
  const l = $('#loading');
  if (l) l.remove();
}

// /readyz answers JSON whether ready (200) or not (503): both are shown, never thrown.
async function readiness() {
  let r;
  try {
    r = await fetch('/readyz', { cache: 'no-store' });
  } catch (e) {
    throw new ApiError(0, 'unreachable', 'The service is not answering.');
  }
  return r.json();
}

// What is wrong on the Kafka side, and the scorers: the first thing a person looks for. With
// `st` (a stream's page), only what concerns that stream: its topic and dead-letter topic,
// its held partitions, its scorers; Kafka unreachable and readiness are the service's.
function healthPanel(rz, st) {
  const ready = rz.status === 'ready';
  const items = [];
  const mine = (topic) => !st || topic === st.topic || topic === st.topic + '.dlq';
  if (rz.kafka_unreachable) {
    items.push(h('li', {}, 'Kafka at ' + rz.kafka_unreachable.brokers + ' has not answered since ' +
      rz.kafka_unreachable.since + ' (' + rz.kafka_unreachable.error + ').'));
  }
  for (const m of (rz.missing_topics || []).filter((m) => mine(m.topic))) {
    items.push(h('li', { 'data-missing-topic': m.topic }, 'Topic ', h('code', {}, m.topic),
      ' does not exist (' + m.why + '); create it with ', h('code', {}, m.create_with), '.'));
  }
  for (const d of (rz.authorization_errors || []).filter((d) => d.resource_type !== 'topic' || mine(d.resource))) {
    items.push(h('li', {}, 'Kafka denies ' + d.operation + ' on ' + d.resource_type + ' ', h('code', {}, d.resource),
      ': ' + d.error));
  }
  for (const p of (rz.held_partitions || []).filter((p) => !st || p.stream === st.name)) {
    items.push(h('li', { 'data-held': p.topic + ':' + p.partition }, 'Partition ' + p.partition + ' of ', h('code', {}, p.topic),
      ' waits at offset ' + p.offset + ' until its dead-letter copy is delivered.'));
  }
  if (!ready && items.length === 0 && rz.error) items.push(h('li', {}, rz.error.message));
  const parts = [h('p', { class: ready ? 'ok' : 'alarm', 'data-col': 'status' },
    ready ? 'Ready: Kafka answers, every topic exists and every stream has its partitions.' :
      'Not ready' + (st && items.length === 0 ? ' (nothing concerning this stream: see the streams page).' : '.'))];
  if (items.length) parts.push(h('ul', {}, items));
  const scorers = (rz.scorers || []).filter((sc) => !st || sc.stream === st.name);
  if (scorers.length) {
    parts.push(h('table', { id: 'scorers-table' },
      h('caption', { class: 'muted' }, 'Scorers: events in, one prediction per event out'),
      h('thead', {}, h('tr', {}, ...['Scorer', 'stream', 'events', 'predictions', 'delivery', 'state', 'model rows']
        .map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, scorers.map((sc) => h('tr', { 'data-scorer': sc.name },
        h('td', {}, sc.name), h('td', {}, sc.stream), h('td', {}, h('code', {}, sc.topic)),
        h('td', {}, h('code', {}, sc.output_topic)), h('td', {}, sc.delivery.replace(/_/g, ' ')),
        h('td', { 'data-col': 'state' }, sc.state.replace(/_/g, ' ')),
        h('td', {}, sc.model_rows === null ? '—' : fmt(sc.model_rows)))))));
  }
  return parts;
}

// A stream's refused messages by reason (those with a count), and their total.
function refusals(st) {
  const a = st.arrivals || { rejected: {} };
  const reasons = Object.entries(a.rejected).filter(([, n]) => n > 0);
  return { a, reasons, total: reasons.reduce((t, [, n]) => t + n, 0) };
}

// A stream's refused messages: the count, the reasons in the title, the summary's note.
function refusedCell(st) {
  const { a, reasons, total } = refusals(st);
  const title = reasons.map(([r, n]) => r + ': ' + n).join(', ') + (a.note ? ' — ' + a.note : '');
  return h('td', { 'data-col': 'refused', class: total ? 'alarm' : '', title: title || 'nothing refused' },
    fmt(total));
}

// One stream's health (its page): the service's readiness and what concerns the stream
// (`healthPanel`), then what arrived, what was refused by reason and what became of the
// dead-letter copies, the partitions and the lag.
function streamHealth(st, rz, lag) {
  const { a, reasons, total } = refusals(st);
  const dl = a.dead_letters || { delivered: 0, failed: 0, skipped: 0 };
  const cards = h('div', { class: 'cards', id: 'arrival-cards' },
    card('topic', h('code', {}, st.topic), { 'data-col': 'topic' }),
    card('messages read', fmt(a.messages), { 'data-col': 'messages' }),
    card('refused', fmt(total), { 'data-col': 'refused', class: 'card' + (total ? ' alarm' : '') }),
    card('dead letters delivered / failed / skipped', fmt(dl.delivered) + ' / ' + fmt(dl.failed) + ' / ' + fmt(dl.skipped),
      { 'data-col': 'dead-letters', title: 'copies of the refused messages in ' + st.topic + '.dlq' }),
    card('lag', st.topic in lag ? fmt(lag[st.topic]) : '—', { 'data-col': 'lag', title: 'messages not yet read' }),
    card('partitions', st.partitions.assigned + ' / ' + st.partitions.total, { 'data-col': 'partitions', title: 'assigned here / total' }));
  const parts = healthPanel(rz, st);
  parts.splice(1, 0, cards);
  if (reasons.length) {
    parts.push(h('table', { id: 'refusals-table' },
      h('caption', { class: 'muted' }, 'Messages refused since the start, by reason (the ravel-reason header of their dead-letter copies)'),
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'reason'), h('th', { scope: 'col' }, 'messages'))),
      h('tbody', {}, reasons.map(([r, n]) => h('tr', { 'data-reason': r }, h('td', {}, r), h('td', {}, fmt(n)))))));
  }
  // The stream's state, not the process's age (issue 59): a stream restored from its
  // checkpoint that read nothing since is an alarm only while messages wait (its lag).
  const waiting = !a.messages && st.topic in lag && lag[st.topic] > 0;
  if (a.note) parts.push(h('p', { class: a.alarm || waiting ? 'alarm' : 'muted', id: 'arrivals-note' },
    a.note + (waiting ? ' — ' + fmt(lag[st.topic]) + ' messages wait to be read.' : '')));
  // Declared fields or a target absent from every one of the first events (a misspelled name).
  const fs = st.fields_seen;
  if (fs && fs.warning) parts.push(h('p', { class: 'alarm', id: 'fields-never-seen' }, 'Fields never seen: ' + fs.warning));
  return parts;
}

function streamsView(main) {
  loaded();
  main.append(h('h1', {}, 'Streams'));
  const health = h('section', { id: 'health', 'aria-label': 'Health' });
  main.append(health);
  const obs = h('div', { class: 'scroll' });
  const feat = h('div', { class: 'scroll' });
  main.append(h('h2', {}, 'Observation streams'), obs, h('h2', {}, 'Feature streams'), feat);
  return {
    name: 'streams',
    async update() {
      const [list, flist, metrics, rz] = await Promise.all([
        get('/v1/streams'), get('/v1/feature-streams'), call('GET', '/metrics', undefined, true), readiness()]);
      health.replaceChildren(...healthPanel(rz));
      const lag = parseLag(metrics);
      const th = (t, title) => h('th', { scope: 'col', title }, t);
      const rows = list.streams.map((st) => {
        const r = rate(st.name, st.n);
        const alarms = st.drift.alarms;
        return h('tr', { 'data-stream': st.name },
          h('td', {}, h('a', { href: '#/streams/' + enc(st.name) }, st.name)),
          h('td', { 'data-col': 'n' }, fmt(st.n)),
          h('td', { 'data-col': 'rate' }, r === null ? '—' : fmt(Math.round(r))),
          h('td', { 'data-col': 'lag' }, st.topic in lag ? fmt(lag[st.topic]) : '—'),
          h('td', { 'data-col': 'last_update' }, age(st.last_update_ms)),
          h('td', { 'data-col': 'alpha' }, st.n > 0 ? fmt(st.alpha) : '—'),
          h('td', { 'data-col': 'ess' }, fmt(Math.round(st.drift.effective_sample_size))),
          h('td', { 'data-col': 'alarms', class: alarms ? 'alarm' : '' }, fmt(alarms)),
          refusedCell(st),
          h('td', { 'data-col': 'partitions' }, st.partitions.assigned + ' / ' + st.partitions.total),
          h('td', {}, h('a', { href: '#/streams/' + enc(st.name) + '/history' }, 'history')));
      });
      obs.replaceChildren(list.streams.length === 0 ? h('p', { class: 'muted' }, 'No observation streams declared.') :
        h('table', { id: 'streams-table' },
          h('caption', { class: 'muted' }, 'rows/s from the change of n between refreshes; lag: messages not yet read'),
          h('thead', {}, h('tr', {}, th('Stream'), th('n', 'rows in the statistics'), th('rows/s'), th('lag'),
            th('last update'), th('alpha', 'weight of the next row'), th('ESS', 'effective sample size'),
            th('drift alarms'), th('refused', 'messages refused since the start (dead-lettered); reasons in the tooltip'),
            th('partitions', 'assigned / total'), th('over time'))),
          h('tbody', {}, rows)));
      const frows = flist.feature_streams.map((f) => {
        const r = rate('features:' + f.name, f.features_seen);
        return h('tr', { 'data-stream': f.name },
          h('td', {}, h('a', { href: '#/feature-streams/' + enc(f.name) }, f.name)),
          h('td', { 'data-col': 'n' }, fmt(f.features_seen)),
          h('td', { 'data-col': 'rate' }, r === null ? '—' : fmt(Math.round(r))),
          h('td', { 'data-col': 'lag' }, f.topic in lag ? fmt(lag[f.topic]) : '—'),
          h('td', {}, age(f.last_update_ms)),
          h('td', {}, f.method + (f.workers > 1 ? ' (' + f.workers + ' workers)' : '')),
          h('td', {}, f.labels ? 'received' : 'waiting'),
          h('td', {}, f.selected_count + ' / ' + f.s),
          h('td', {}, fmt(f.passes)),
          h('td', {}, fmt(f.loss)));
      });
      feat.replaceChildren(flist.feature_streams.length === 0 ? h('p', { class: 'muted' }, 'No feature streams declared.') :
        h('table', { id: 'feature-streams-table' },
          h('thead', {}, h('tr', {}, th('Feature stream'), th('features seen'), th('features/s'), th('lag'),
            th('last update'), th('method'), th('labels'), th('selected / s'), th('passes'), th('loss'))),
          h('tbody', {}, frows)));
    },
  };
}

// ---- charts -----------------------------------------------------------------------------

// Axis ticks at round values (1, 2, 2.5 or 5 times a power of ten) inside [lo, hi], about
// `count` of them, with their step: labels printed to the step's precision differ from each
// other however narrow the range is next to its values (an EBIC of 95,1xx: 95,120, 95,140,
// ..., where four significant digits printed 9.5e+4 five times).
function niceTicks(lo, hi, count, minStep) {
  if (!(hi > lo)) return { values: [lo], step: Math.abs(lo) || 1 };
  const raw = (hi - lo) / count;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = Math.max(minStep || 0, [1, 2, 2.5, 5, 10].map((m) => m * mag).find((st) => st >= raw));
  const values = [];
  // Multiples of the step, rounded to it so that 0.30000000000000004 prints as 0.3.
  for (let i = Math.ceil(lo / step - 1e-9); i * step <= hi + step * 1e-9; i++) {
    const v = Number((i * step).toPrecision(12));
    if (v >= lo - step * 1e-9 && v <= hi + step * 1e-9) values.push(v);
  }
  return { values, step };
}
// A tick's label: as many decimals as the step needs (exponential for very large or very
// small values, with as many digits as the step needs there too).
function tickLabel(v, step, maxAbs) {
  const stepExp = Math.floor(Math.log10(step) + 1e-9);
  const lead = step * Math.pow(10, -stepExp);
  const extra = Math.abs(lead - Math.round(lead)) > 1e-6 ? 1 : 0; // a step of 2.5 x 10^e
  if (maxAbs >= 1e6 || maxAbs < 1e-3) {
    if (v === 0) return '0';
    const digits = Math.max(1, Math.floor(Math.log10(maxAbs) + 1e-9) - stepExp + extra);
    return v.toExponential(Math.min(digits, 14));
  }
  const decimals = Math.max(0, -stepExp + extra);
  return v.toLocaleString('en-US', { minimumFractionDigits: decimals, maximumFractionDigits: decimals });
}
// Time ticks (Unix seconds): seconds, or tenths when the step is under a second.
function timeLabel(v, step) {
  const d = new Date(v * 1000);
  const t = d.toLocaleTimeString('en-GB', { hour12: false });
  return step < 1 ? t + '.' + String(d.getMilliseconds()).padStart(3, '0').slice(0, step < 0.1 ? 2 : 1) : t;
}

// A line chart: series [{name, colour, points: [[x, y], ...], attrs}], vertical marks
// [{x, cls, label, attrs}]; x may be reversed, x may be time (`xTime`, Unix seconds). Ticks
// at round values inside the data's range (`niceTicks`); the range is on the SVG
// (data-x-min ... data-y-max) and each tick label is a `text.tick` with its axis.
function lineChart(opts) {
  const W = opts.width || 720, H = opts.height || 280, L = opts.yLabel ? 72 : 60, R = 12, T = 12, B = 34;
  let xs = [], ys = [];
  for (const se of opts.series) for (const [x, y] of se.points) { xs.push(x); ys.push(y); }
  for (const m of opts.marks || []) xs.push(m.x);
  const svg = s('svg', { class: 'chart', viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': opts.label });
  if (xs.length === 0) {
    svg.append(s('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle' }, opts.empty || 'no data yet'));
    return svg;
  }
  let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  let [y0, y1] = [Math.min(...ys, opts.yZero ? 0 : Infinity), Math.max(...ys, opts.yZero ? 0 : -Infinity)];
  if (!Number.isFinite(y0)) { y0 = 0; y1 = 1; }
  const range = { x0, x1, y0, y1 };
  svg.setAttribute('data-x-min', x0); svg.setAttribute('data-x-max', x1);
  svg.setAttribute('data-y-min', y0); svg.setAttribute('data-y-max', y1);
  if (opts.xReverse) svg.setAttribute('data-x-reverse', 'true');
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  if (y0 === y1) { y0 -= 1; y1 += 1; }
  const pad = (y1 - y0) * 0.05; y0 -= pad; y1 += pad;
  const X = (x) => { const f = (x - x0) / (x1 - x0); return L + (opts.xReverse ? 1 - f : f) * (W - L - R); };
  const Y = (y) => T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
  svg.append(s('line', { class: 'axis', x1: L, y1: H - B, x2: W - R, y2: H - B }),
    s('line', { class: 'axis', x1: L, y1: T, x2: L, y2: H - B }));
  // Ticks inside the data's range (not the padding); a single value gets one tick.
  const yt = niceTicks(range.y0, range.y1, 5);
  const yMax = Math.max(Math.abs(range.y0), Math.abs(range.y1));
  for (const v of yt.values) {
    svg.append(s('text', { class: 'tick', 'data-axis': 'y', 'data-value': v, x: L - 4, y: Y(v) + 4, 'text-anchor': 'end' }, tickLabel(v, yt.step, yMax)));
  }
  const xt = niceTicks(range.x0, range.x1, Math.max(2, Math.min(6, Math.floor((W - L - R) / 110))), opts.xInteger ? 1 : 0);
  const xMax = Math.max(Math.abs(range.x0), Math.abs(range.x1));
  for (const v of xt.values) {
    svg.append(s('text', { class: 'tick', 'data-axis': 'x', 'data-value': v, x: X(v), y: H - B + 14, 'text-anchor': 'middle' },
      opts.xTime ? timeLabel(v, xt.step) : tickLabel(v, xt.step, xMax)));
  }
  if (opts.yLabel) {
    svg.append(s('text', { x: 12, y: (T + H - B) / 2, 'text-anchor': 'middle', transform: 'rotate(-90 12 ' + (T + H - B) / 2 + ')' }, opts.yLabel));
  }
  svg.append(s('text', { x: (L + W - R) / 2, y: H - 4, 'text-anchor': 'middle' }, opts.xLabel || ''));
  if (opts.zeroLine && y0 < 0 && y1 > 0) svg.append(s('line', { class: 'axis', x1: L, x2: W - R, y1: Y(0), y2: Y(0) }));
  for (const m of opts.marks || []) {
    svg.append(s('line', Object.assign({ class: m.cls || 'mark', x1: X(m.x), x2: X(m.x), y1: T, y2: H - B }, m.attrs || {}),
      s('title', {}, m.label || '')));
  }
  for (const se of opts.series) {
    if (se.points.length === 0) continue;
    const d = se.points.map(([x, y], i) => (i ? 'L' : 'M') + X(x).toFixed(1) + ' ' + Y(y).toFixed(1)).join('');
    const path = s('path', Object.assign({ class: 'series', d, stroke: se.colour }, se.attrs || {}), s('title', {}, se.name));
    if (opts.onHover) {
      path.addEventListener('mouseenter', () => opts.onHover(se.name, svg));
      path.addEventListener('mouseleave', () => opts.onHover(null, svg));
    }
    svg.append(path);
  }
  return svg;
}

// A coefficient chart (a forest plot): one row per coefficient, its estimate a dot and, when
// it has one, its confidence interval a bar with end caps (`path.ci`, its bounds in
// data-lower / data-upper), beside a zero line. items: [{name, value, lower, upper, colour,
// title}]; the x axis spans the dots, the bars and 0, with ticks at round values.
function coefChart(opts) {
  const items = opts.items;
  const W = opts.width || 720, ROW = 22, L = 150, R = 16, T = 8, B = 34;
  const H = T + B + ROW * Math.max(1, items.length);
  const svg = s('svg', { class: 'chart', viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': opts.label });
  if (items.length === 0) {
    svg.append(s('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle' }, opts.empty || 'no coefficient'));
    return svg;
  }
  const xs = [0];
  for (const it of items) {
    xs.push(it.value);
    if (Number.isFinite(it.lower) && Number.isFinite(it.upper)) xs.push(it.lower, it.upper);
  }
  let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  const range = { x0, x1 };
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  const pad = (x1 - x0) * 0.04; x0 -= pad; x1 += pad;
  const X = (x) => L + (x - x0) / (x1 - x0) * (W - L - R);
  svg.setAttribute('data-x-min', range.x0); svg.setAttribute('data-x-max', range.x1);
  svg.append(s('line', { class: 'axis', x1: L, y1: H - B, x2: W - R, y2: H - B }),
    s('line', { class: 'axis', 'data-zero': 'true', x1: X(0), x2: X(0), y1: T, y2: H - B }));
  const xt = niceTicks(range.x0, range.x1, Math.max(2, Math.min(6, Math.floor((W - L - R) / 110))));
  const xMax = Math.max(Math.abs(range.x0), Math.abs(range.x1));
  for (const v of xt.values) {
    svg.append(s('text', { class: 'tick', 'data-axis': 'x', 'data-value': v, x: X(v), y: H - B + 14, 'text-anchor': 'middle' }, tickLabel(v, xt.step, xMax)));
  }
  svg.append(s('text', { x: (L + W - R) / 2, y: H - 4, 'text-anchor': 'middle' }, opts.xLabel || ''));
  items.forEach((it, i) => {
    const y = T + ROW * i + ROW / 2;
    const g = s('g', { class: 'coef', 'data-feature': it.name }, s('title', {}, it.title || it.name));
    g.append(s('text', { class: 'feature', x: L - 6, y: y + 4, 'text-anchor': 'end' }, it.name.length > 22 ? it.name.slice(0, 21) + '…' : it.name));
    if (Number.isFinite(it.lower) && Number.isFinite(it.upper)) {
      const [a, b] = [X(it.lower), X(it.upper)];
      const d = 'M' + a.toFixed(1) + ' ' + (y - 5) + 'V' + (y + 5) + 'M' + a.toFixed(1) + ' ' + y + 'H' + b.toFixed(1) +
        'M' + b.toFixed(1) + ' ' + (y - 5) + 'V' + (y + 5);
      g.append(s('path', { class: 'ci', d, stroke: it.colour, 'data-lower': it.lower, 'data-upper': it.upper }));
    }
    g.append(s('circle', { class: 'estimate', cx: X(it.value).toFixed(1), cy: y, r: 4, fill: it.colour, 'data-value': it.value }));
    svg.append(g);
  });
  return svg;
}

function highlight(svg, name) {
  svg.classList.toggle('dim', !!name);
  for (const p of svg.querySelectorAll('.series')) p.classList.toggle('hot', p.getAttribute('data-feature') === name);
}

// ---- one stream: path and model ---------------------------------------------------------

function streamHeader(main, st, active) {
  loaded();
  const base = '#/streams/' + enc(st.name);
  main.append(h('h1', {}, st.name, h('span', { class: 'muted' }, ' · ' + st.task + ', p = ' + st.p)),
    h('div', { class: 'cards', id: 'stream-cards' }),
    h('section', { id: 'stream-health', 'aria-label': 'Health' }),
    h('nav', { class: 'tabs', 'aria-label': 'Stream views' },
      h('a', { href: base, 'aria-current': active === 'model' ? 'page' : null }, 'Path and model'),
      h('a', { href: base + '/history', 'aria-current': active === 'history' ? 'page' : null }, 'Change over time')));
}
// Readiness and the lag of every topic, for a stream's health (`streamHealth`), fetched
// beside the stream.
async function healthInputs() {
  const [rz, metrics] = await Promise.all([readiness(), call('GET', '/metrics', undefined, true)]);
  return { rz, lag: parseLag(metrics) };
}
// An empty stream has no alpha to show (the next row gets alpha 1, whatever the schedule)
// and an effective sample size of 0.
function fillCards(st, health) {
  $('#stream-cards').replaceChildren(card('n', fmt(st.n), { 'data-col': 'n' }),
    card('alpha', st.n > 0 ? fmt(st.alpha) : '—', { 'data-col': 'alpha', title: st.n > 0 ? 'the weight of the next row' : 'no row yet' }),
    card('effective sample size', fmt(Math.round(st.drift.effective_sample_size)),
      { 'data-col': 'ess', title: "Kish's (sum of the rows' weights)² / sum of their squares: n for plain averages" }),
    card('drift alarms', fmt(st.drift.alarms), { class: 'card' + (st.drift.alarms ? ' alarm' : '') }),
    card('schedule', st.schedule.split(':')[0], { title: st.schedule }), card('last update', age(st.last_update_ms)));
  $('#stream-health').replaceChildren(h('h2', {}, 'Health'), ...streamHealth(st, health.rz, health.lag));
}

// The features' population standard deviations the solver standardizes with: the stream's
// (regression) or the negatives' (classification, README "Classification"); null before any.
function featureSds(st) {
  const sd = st.sd_x || (st.classes && st.classes.negative.sd_x);
  return sd && st.n > 0 ? sd : null;
}

// ---- windows of time (streams with `windows`) -------------------------------------------

// The spans offered besides all time and a custom from-to (those longer than the stream's
// `windows.keep` are left out: the API refuses them).
const WINDOW_PRESETS = [['1h', 3600e3], ['24h', 86400e3], ['7d', 7 * 86400e3]];

// Unix ms as a datetime-local input's value (the browser's local time, to the second).
function localInput(ms) {
  const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
  return d.toISOString().slice(0, 19);
}

// A time range control: all time, the presets, or custom from / to (local time). `id` names
// its parts (`id`-range, `id`-from, `id`-to); `onchange` runs when a complete choice is made.
function windowPicker(id, label, keepMs, initial, onchange) {
  const presets = WINDOW_PRESETS.filter(([, ms]) => ms <= keepMs);
  const range = h('select', { id: id + '-range', name: id + '-range' },
    h('option', { value: 'all', selected: initial === 'all' }, 'all time'),
    presets.map(([v]) => h('option', { value: v, selected: initial === v }, 'last ' + v)),
    h('option', { value: 'custom', selected: initial === 'custom' }, 'custom from–to'));
  const now = Date.now();
  const from = h('input', { id: id + '-from', name: id + '-from', type: 'datetime-local', step: 1, value: localInput(now - 3600e3) });
  const to = h('input', { id: id + '-to', name: id + '-to', type: 'datetime-local', step: 1, value: localInput(now) });
  const custom = h('span', { class: 'controls', id: id + '-custom', hidden: initial !== 'custom' },
    h('label', { for: id + '-from' }, 'from', from), h('label', { for: id + '-to' }, 'to', to));
  range.addEventListener('change', () => { custom.hidden = range.value !== 'custom'; onchange && onchange(); });
  for (const el of [from, to]) el.addEventListener('change', () => { if (range.value === 'custom') onchange && onchange(); });
  return h('span', { class: 'controls window-picker', id: id },
    h('label', { for: id + '-range' }, label, range), custom);
}

// The `"window"` of a picker (null: all time), or an error in the page's words.
function windowOf(id) {
  const range = $('#' + id + '-range');
  if (!range || range.value === 'all') return { window: null };
  if (range.value !== 'custom') return { window: { last: range.value } };
  const from = new Date($('#' + id + '-from').value).getTime();
  const to = new Date($('#' + id + '-to').value).getTime();
  if (!Number.isFinite(from) || !Number.isFinite(to)) return { error: { code: 'invalid_window', message: 'Give both a from and a to time.' } };
  if (to <= from) return { error: { code: 'invalid_window', message: 'The "to" time must be after the "from" time.' } };
  return { window: { from, to } };
}

// A window as the query of GET .../path.
function windowQuery(w) {
  if (!w) return '';
  if (w.last) return '&window.last=' + enc(w.last);
  return '&window.from=' + w.from + '&window.to=' + w.to;
}

// The span a windowed answer covers, in words.
function windowText(w) {
  return new Date(w.from).toLocaleString() + ' – ' + new Date(w.to).toLocaleString() + ' (' + fmt(w.n) + ' rows)';
}

function streamView(main, name) {
  let st = null, built = false, lastPathAt = 0, busy = false, again = false;
  // By default the model shown is the one the criterion chooses along the path (issue 34);
  // typing a k or a lambda switches to that point.
  const req = { method: 'lasso', by: 'select', k: null, lambda: null, criterion: 'ebic', window: null, intercept: true };
  const sort = { key: 'abs', desc: true };
  // The path in original units (the API's) or standardized (b_j times sd_j).
  const units = { standardized: false };
  let model = null, path = null, modelError = null, selectError = null;
  const view = {
    name: 'stream',
    async update() {
      let health;
      try {
        [st, health] = await Promise.all([get('/v1/streams/' + enc(name)), healthInputs()]);
      } catch (e) {
        if (e.code === 'unknown_stream') { app.view = null; clearTimeout(app.timer); await unknownStream(main, 'stream', name); return; }
        throw e;
      }
      if (!built) { build(); built = true; }
      fillCards(st, health);
      // The path and the model: at first, then every 10 s while the stream grows.
      if (Date.now() - lastPathAt > 10000 && st.n > 0) await refresh();
      else if (st.n === 0) $('#path-box').replaceChildren(h('p', { class: 'muted' }, 'No rows yet: the path appears with the first rows.'));
    },
  };
  function build() {
    streamHeader(main, st, 'model');
    if (req.k === null) req.k = Math.min(5, st.p);
    const method = h('select', { id: 'method', name: 'method' }, PATH_METHODS.map((m) => h('option', { value: m, selected: m === req.method }, m)));
    const bySel = h('input', { type: 'radio', name: 'by', value: 'select', id: 'by-select', checked: req.by === 'select' });
    const byK = h('input', { type: 'radio', name: 'by', value: 'k', id: 'by-k', checked: req.by === 'k' });
    const byL = h('input', { type: 'radio', name: 'by', value: 'lambda', id: 'by-lambda', checked: req.by === 'lambda' });
    const k = h('input', { id: 'k', name: 'k', type: 'number', min: 1, step: 1, value: req.k, inputmode: 'numeric' });
    const lam = h('input', { id: 'lambda', name: 'lambda', type: 'text', inputmode: 'decimal', placeholder: 'e.g. 0.01' });
    // Unticked: the model through the origin (the request's "intercept": false).
    const icpt = h('input', { id: 'intercept', name: 'intercept', type: 'checkbox', checked: req.intercept });
    k.addEventListener('input', () => { byK.checked = true; });
    lam.addEventListener('input', () => { byL.checked = true; });
    const form = h('form', { class: 'controls', id: 'model-form', 'aria-label': 'Model at a point of the path' },
      h('label', { for: 'method' }, 'method', method),
      h('fieldset', { class: 'muted', style: 'border:0;padding:0;margin:0' }, h('legend', {}, 'choose by'),
        h('label', { for: 'by-select', style: 'flex-direction:row;gap:4px' }, bySel, 'the criterion below'),
        h('label', { for: 'by-k', style: 'flex-direction:row;gap:4px' }, byK, 'k (nonzeros)'),
        h('label', { for: 'by-lambda', style: 'flex-direction:row;gap:4px' }, byL, 'lambda')),
      h('label', { for: 'k' }, 'k', k),
      h('label', { for: 'lambda' }, 'lambda', lam),
      h('label', { for: 'intercept', style: 'flex-direction:row;gap:4px', title: 'untick for a model through the origin (no intercept: R² uncentred, n − p residual degrees of freedom)' }, icpt, 'intercept'),
      st.windows ? windowPicker('window', 'time range', st.windows.keep_ms, 'all', () => form.requestSubmit()) : null,
      h('button', { type: 'submit', class: 'primary', id: 'show-model' }, 'Show model'));
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const w = windowOf('window');
      if (w.error) { $('#model-error').replaceChildren(errorBox(w.error)); return; }
      req.window = w.window;
      req.method = method.value;
      req.by = bySel.checked ? 'select' : byL.checked ? 'lambda' : 'k';
      req.k = k.value.trim();
      req.lambda = lam.value.trim();
      req.intercept = icpt.checked;
      lastPathAt = 0;
      await refresh();
    });
    main.append(form,
      h('div', { id: 'model-error' }),
      h('h2', {}, 'Coefficient path'),
      h('p', { class: 'muted', id: 'hover', 'aria-live': 'polite' }, 'Hover a line (or focus a name below) to see its feature.'),
      h('div', { id: 'path-box' }),
      h('section', { id: 'selection-curve', 'aria-label': 'Model selection' },
        h('h2', {}, 'Which lambda? Model selection along the path'),
        h('form', { class: 'controls', id: 'criterion-form', 'aria-label': 'Selection criterion' },
          h('label', { for: 'criterion' }, 'criterion',
            h('select', {
              id: 'criterion', name: 'criterion',
              onchange: async (ev) => { req.criterion = ev.target.value; lastPathAt = 0; await refresh(); },
            }, CRITERIA.map((c) => h('option', { value: c, selected: c === req.criterion }, c)))),
          h('button', {
            type: 'button', id: 'use-chosen', disabled: true,
            onclick: async () => {
              if (!chosenPoint()) return;
              req.by = 'select';
              $('#by-select').checked = true;
              lastPathAt = 0;
              await refresh();
            },
          }, 'Show the chosen model')),
        h('div', { id: 'selection-box' })),
      h('h2', {}, 'Model at the chosen point'),
      h('div', { id: 'model-box' }),
      st.windows ? compareSection() : null);
  }
  // Two windows' coefficients side by side: the model the form asks for (method and k,
  // lambda or criterion) over window A and over window B.
  function compareSection() {
    const keep = st.windows.keep_ms;
    const form = h('form', { class: 'controls', id: 'compare-form', 'aria-label': 'Compare two windows' },
      windowPicker('compare-a', 'window A', keep, 'custom'),
      windowPicker('compare-b', 'window B', keep, WINDOW_PRESETS[0][1] <= keep ? '1h' : 'all'),
      h('button', { type: 'submit', class: 'primary', id: 'compare-button' }, 'Compare'));
    form.addEventListener('submit', async (ev) => { ev.preventDefault(); await compare(); });
    return h('section', { id: 'compare', 'aria-label': 'Compare two windows' },
      h('h2', {}, 'Compare two windows of time'),
      h('p', { class: 'muted' }, 'The model the form above asks for, over two windows of time (the stream keeps buckets of ' +
        fmt(st.windows.bucket_ms / 1000) + ' s for ' + fmt(st.windows.keep_ms / 3600e3) + ' h): each exactly the model of the rows stamped in its window.'),
      form, h('div', { id: 'compare-box' }));
  }
  async function compare() {
    const box = $('#compare-box');
    const { body, error } = modelBody();
    const a = windowOf('compare-a'), b = windowOf('compare-b');
    const bad = error || a.error || b.error;
    if (bad) { box.replaceChildren(errorBox(bad)); return; }
    const bodies = [a, b].map((w) => Object.assign({}, body, w.window ? { window: w.window } : {}));
    let models;
    try {
      models = await Promise.all(bodies.map((bd) => call('POST', '/v1/streams/' + enc(name) + '/model', bd)));
    } catch (e) {
      if (e.away) throw e;
      box.replaceChildren(errorBox(e));
      return;
    }
    const [ma, mb] = models;
    const value = (m, f) => { const c = m.coefficients.find((c) => c.feature === f); return c ? c.value : 0; };
    const features = [...new Set([...ma.coefficients, ...mb.coefficients].map((c) => c.feature))];
    const rows = features.map((f) => ({ f, a: value(ma, f), b: value(mb, f) }));
    rows.sort((x, y) => Math.abs(y.b - y.a) - Math.abs(x.b - x.a));
    const cell = (col, v) => h('td', { 'data-col': col, 'data-value': String(v) }, fmt(v, 6));
    const span = (m) => (m.window ? windowText(m.window) : 'all time (' + fmt(m.n) + ' rows)');
    box.replaceChildren(
      h('div', { class: 'cards', id: 'compare-cards', 'data-request-a': JSON.stringify(bodies[0]), 'data-request-b': JSON.stringify(bodies[1]) },
        card('window A', span(ma), { 'data-col': 'window-a' }), card('window B', span(mb), { 'data-col': 'window-b' }),
        card('k in A / B', fmt(ma.k) + ' / ' + fmt(mb.k)), card('R² in A / B', fmt(ma.diagnostics.r2) + ' / ' + fmt(mb.diagnostics.r2))),
      h('div', { class: 'scroll' }, h('table', { id: 'compare-table' },
        h('caption', { class: 'muted' }, 'Coefficients in original units (0: not in that model), largest difference first.'),
        h('thead', {}, h('tr', {}, ['Feature', 'in A', 'in B', 'B − A'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {},
          h('tr', { 'data-feature': '(intercept)' }, h('td', {}, '(intercept)'), cell('a', ma.intercept), cell('b', mb.intercept), cell('diff', mb.intercept - ma.intercept)),
          rows.map((r) => h('tr', { 'data-feature': r.f }, h('td', {}, r.f), cell('a', r.a), cell('b', r.b), cell('diff', r.b - r.a)))))));
  }
  // The model request the form describes (without its window), or the reason it has none.
  function modelBody() {
    const body = { method: req.method };
    if (!req.intercept) body.intercept = false;
    if (req.by === 'select') {
      // The same 40-point path as the curve below, so the model is its marked point.
      body.select = req.criterion;
      body.path_points = 40;
    } else if (req.by === 'k') {
      const kv = Number(req.k);
      if (!/^\d+$/.test(String(req.k)) || kv < 1) return { error: { code: 'invalid_k', message: 'k must be a whole number of at least 1 (the stream has p = ' + st.p + ' features).' } };
      body.k = kv;
      // At k the model is refitted on its support (least squares): the API gives its
      // standard errors, t and p-values (README "Standard errors").
      if (st.task !== 'classification') body.inference = true;
    } else {
      const lv = Number(req.lambda);
      if (req.lambda === '' || !Number.isFinite(lv) || lv < 0) return { error: { code: 'invalid_lambda', message: 'lambda must be a number of at least 0, e.g. 0.01.' } };
      body.lambda = lv;
    }
    return { body };
  }
  async function refresh() {
    // A change while a refresh runs (a new time range) is not lost: it runs once more after.
    if (busy) { again = true; return; }
    busy = true;
    again = false;
    try {
      const asked = modelBody();
      const body = asked.body;
      modelError = asked.error || null;
      if (body && req.window) body.window = req.window;
      const pathUrl = '/v1/streams/' + enc(name) + '/path?method=' + enc(req.method) + '&path_points=40' + (req.intercept ? '' : '&intercept=false') + windowQuery(req.window);
      // The path with the criterion's curve; if the criterion cannot be computed here (CV on
      // a stream without fold statistics), the plain path and the reason.
      selectError = null;
      const pathReq = get(pathUrl + '&select=' + enc(req.criterion)).catch((e) => {
        if (e.away || e.status >= 500) throw e;
        selectError = e;
        return get(pathUrl);
      });
      if (!modelError) {
        try { model = await call('POST', '/v1/streams/' + enc(name) + '/model', body); }
        catch (e) { if (e.away) throw e; modelError = e; model = null; }
      } else {
        model = null;
      }
      try { path = await pathReq; } catch (e) { if (e.away) throw e; path = null; if (!modelError) modelError = e; }
      lastPathAt = Date.now();
      $('#model-error').replaceChildren(modelError ? errorBox(modelError) : '');
      drawPath();
      drawSelection();
      drawModel();
    } finally {
      busy = false;
    }
    if (again) { lastPathAt = 0; await refresh(); }
  }
  function drawPath() {
    const box = $('#path-box');
    if (!path) { box.replaceChildren(h('p', { class: 'muted' }, 'No path.')); return; }
    // One series per feature that is ever nonzero on the path.
    const byFeature = new Map();
    path.points.forEach((pt) => {
      for (const c of pt.coefficients) if (c.value !== 0 && !byFeature.has(c.feature)) byFeature.set(c.feature, c.index);
    });
    const xOf = (pt) => Math.log10(pt.lambda);
    const sd = featureSds(st);
    if (!sd) units.standardized = false;
    const scale = (idx) => (units.standardized ? sd[idx] : 1);
    const series = [...byFeature.entries()].map(([feat, idx]) => ({
      name: feat, colour: colour(idx), attrs: { 'data-feature': feat },
      points: path.points.filter((pt) => pt.lambda > 0).map((pt) => {
        const c = pt.coefficients.find((c) => c.index === idx);
        return [xOf(pt), c ? c.value * scale(idx) : 0];
      }),
    }));
    const marks = model && model.lambda > 0 ? [{ x: Math.log10(model.lambda), label: 'the model below (lambda = ' + fmt(model.lambda) + ')' }] : [];
    const hover = $('#hover');
    const chart = lineChart({
      series, marks, xReverse: true, zeroLine: true, label: 'Coefficient path of ' + name,
      xLabel: 'log10 lambda (smaller to the right: more features)',
      yLabel: units.standardized ? 'b × sd(x): per sd of the feature' : 'coefficient (original units)',
      onHover: (f, svg) => { highlight(svg, f); hover.textContent = f ? 'Feature ' + f : 'Hover a line (or focus a name below) to see its feature.'; },
    });
    chart.id = 'path-chart';
    const legend = h('ul', { class: 'legend', 'aria-label': 'Features on the path' },
      series.map((se) => h('li', {}, h('button', {
        type: 'button', 'data-feature': se.name,
        onmouseenter: () => { highlight(chart, se.name); hover.textContent = 'Feature ' + se.name; },
        onfocus: () => { highlight(chart, se.name); hover.textContent = 'Feature ' + se.name; },
        onblur: () => highlight(chart, null), onmouseleave: () => highlight(chart, null),
      }, h('i', { style: 'background:' + se.colour }), se.name))));
    const toggle = h('fieldset', { class: 'controls', id: 'units', style: 'border:0;padding:0;margin:0 0 4px', 'aria-label': 'Units of the path' },
      h('legend', { class: 'muted', style: 'float:left;margin-right:8px' }, 'units'),
      ...[['original', 'original units (b)'], ['standardized', 'standardized (b × sd(x))']].map(([v, label]) =>
        h('label', { for: 'units-' + v, style: 'flex-direction:row;gap:4px' },
          h('input', {
            type: 'radio', name: 'units', value: v, id: 'units-' + v, disabled: !sd,
            checked: units.standardized === (v === 'standardized'),
            onchange: () => { units.standardized = v === 'standardized'; drawPath(); drawModel(); $('#units-' + v).focus(); },
          }), label)));
    const note = h('p', { class: 'muted', id: 'units-note' }, units.standardized
      ? 'Standardized: each coefficient times its feature\'s standard deviation' + (st.task === 'classification' ? ' (the negatives\', as the solver standardizes)' : '') +
        ', the change in the prediction per standard deviation of the feature, in the units of y: comparable across features (glmnet\'s and scikit-learn\'s scale with standardized x; y is not divided by its sd).'
      : 'Original units: the change in the prediction per unit of the feature, as the API returns the coefficients.');
    box.replaceChildren(toggle, chart, note, legend);
  }
  function chosenPoint() {
    const sel = path && path.selection;
    return sel ? sel.curve[sel.chosen] : null;
  }
  function drawSelection() {
    const box = $('#selection-box');
    const use = $('#use-chosen');
    const sel = path && path.selection;
    use.disabled = !sel;
    if (!sel) {
      box.replaceChildren(selectError ? errorBox(selectError) : h('p', { class: 'muted' }, 'No selection curve.'));
      return;
    }
    const cv = sel.criterion.startsWith('cv');
    const pts = sel.curve.filter((c) => c.lambda > 0);
    const xOf = (c) => Math.log10(c.lambda);
    // The sparsest models' values dwarf the region of the minimum: clip the curve above the
    // upper half of the values spread from the minimum (a clipped stretch runs along the top).
    const sortedValues = pts.map((c) => c.value).sort((a, b) => a - b);
    const lo = sortedValues[0];
    const mid = sortedValues[Math.floor(sortedValues.length / 2)];
    const cap = mid > lo ? mid + 2 * (mid - lo) : Infinity;
    const clipped = sortedValues.length > 0 && sortedValues[sortedValues.length - 1] > cap;
    const y = (v) => Math.min(v, cap);
    const series = [{ name: sel.criterion, colour: 'var(--accent)', attrs: { 'data-curve': sel.criterion }, points: pts.map((c) => [xOf(c), y(c.value)]) }];
    if (cv) {
      // One standard error either side of the mean held-out error.
      for (const [nm, sign] of [['+1 SE', 1], ['-1 SE', -1]]) {
        series.push({ name: nm, colour: 'var(--muted)', attrs: { 'stroke-dasharray': '4 3' }, points: pts.map((c) => [xOf(c), y(c.value + sign * (c.se || 0))]) });
      }
    }
    const chosen = sel.curve[sel.chosen];
    const marks = [];
    if (chosen.lambda > 0) marks.push({ x: xOf(chosen), label: 'chosen: lambda = ' + fmt(chosen.lambda) + ', k = ' + chosen.k, attrs: { 'data-chosen': 'true' } });
    if (sel.minimum !== undefined && sel.minimum !== null && sel.minimum !== sel.chosen && sel.curve[sel.minimum].lambda > 0) {
      const m = sel.curve[sel.minimum];
      marks.push({ x: xOf(m), cls: 'alarm-mark', label: 'CV minimum: lambda = ' + fmt(m.lambda) + ', k = ' + m.k, attrs: { 'stroke-dasharray': '6 3' } });
    }
    const chart = lineChart({
      series, marks, xReverse: true, label: sel.criterion + ' along the path of ' + name,
      xLabel: 'log10 lambda (smaller to the right: more features)',
      empty: 'no point on the path',
    });
    chart.id = 'selection-chart';
    const what = cv ? 'mean held-out error (' + (sel.fold_sizes ? sel.fold_sizes.length : '?') + ' folds; dashed: one standard error)' : sel.criterion.toUpperCase() + ' (smaller is better)';
    box.replaceChildren(
      h('p', { id: 'chosen-text', 'data-chosen-k': String(chosen.k), 'data-chosen-lambda': String(chosen.lambda) },
        sel.criterion + ' chooses lambda = ' + fmt(chosen.lambda) + ' with k = ' + chosen.k + ' nonzeros (the vertical line). The curve: ' + what +
        (clipped ? ', clipped above ' + fmt(cap) + ' to show its minimum' : '') + '; degrees of freedom: ' + sel.df_rule + '.'),
      chart,
      h('ul', { class: 'muted' }, (sel.notes || []).map((n) => h('li', {}, n))));
  }
  function drawModel() {
    const box = $('#model-box');
    if (!model) { box.replaceChildren(h('p', { class: 'muted' }, 'No model: see the message above.')); return; }
    const rows = model.coefficients.slice();
    const key = { name: (c) => c.feature, value: (c) => c.value, abs: (c) => Math.abs(c.value) }[sort.key];
    rows.sort((a, b) => { const x = key(a), y = key(b); const r = x < y ? -1 : x > y ? 1 : 0; return sort.desc ? -r : r; });
    const head = (label, k) => h('th', { scope: 'col', 'aria-sort': sort.key === k ? (sort.desc ? 'descending' : 'ascending') : 'none' },
      h('button', { type: 'button', 'data-sort': k, onclick: () => { if (sort.key === k) sort.desc = !sort.desc; else { sort.key = k; sort.desc = k !== 'name'; } drawModel(); } },
        label + (sort.key === k ? (sort.desc ? ' ▼' : ' ▲') : '')));
    const d = model.diagnostics;
    const chosenBy = model.selection
      ? card('chosen by', model.selection.criterion, { 'data-col': 'chosen-by', title: 'the point ' + model.selection.criterion + ' chooses along the path (marked on the curve above)' })
      : card('chosen by', req.by === 'lambda' ? 'lambda typed' : 'k typed', { 'data-col': 'chosen-by' });
    // Standard errors where the API gives them (a model refitted at k), by feature.
    const inf = model.inference;
    const est = new Map(inf ? inf.coefficients.map((e) => [e.feature, e]) : []);
    const sd = featureSds(st);
    const caption = inf
      ? 'Coefficients in original units, with their standard errors, t and two-sided p-values (Student t, ' + fmt(inf.df_resid) + ' residual degrees of freedom)' +
        (inf.post_selection ? '; the support was chosen on the same rows, so the standard errors are too small and the p-values too optimistic.' : '.')
      : 'Coefficients in original units. ' + (req.by === 'k'
        ? 'No standard errors: ' + ((d.notes || []).find((n) => n.startsWith('no inference')) || (st.task === 'classification' ? 'they are for regression.' : 'the API gave none.'))
        : 'A penalized model at a lambda has no standard errors; choose by k for the model refitted on its support, which has them.');
    const infHeads = inf ? [h('th', { scope: 'col' }, 'SE'), h('th', { scope: 'col' }, 't'), h('th', { scope: 'col' }, 'p')] : [];
    box.replaceChildren(
      coefficientChart(rows, est, inf, sd),
      h('div', { class: 'cards', id: 'model-cards' },
        card('method', model.method), chosenBy, card('nonzeros k', fmt(model.k), { 'data-col': 'k' }),
        card('lambda', fmt(model.lambda)), card(d.intercept === false ? 'R² (uncentred)' : 'R²', fmt(d.r2), { 'data-col': 'r2' }),
        card('n', fmt(model.n)),
        model.window ? card('window', windowText(model.window), { 'data-col': 'window', 'data-from': String(model.window.from), 'data-to': String(model.window.to) }) : null,
        d.intercept === false
          ? card('intercept', 'none', { 'data-col': 'intercept', title: 'a model through the origin: no intercept, R² uncentred (1 − RSS / Σy²)' })
          : card('intercept', fmt(model.intercept) + (inf && inf.intercept ? ' ± ' + fmt(inf.intercept.se) : ''), { 'data-col': 'intercept', title: inf ? 'estimate ± standard error' : null })),
      h('div', { class: 'scroll' }, h('table', { id: 'model-table' },
        h('caption', { class: 'muted' }, caption),
        h('thead', {}, h('tr', {}, head('Feature', 'name'), head('Coefficient', 'value'), head('|Coefficient|', 'abs'),
          h('th', { scope: 'col', title: 'coefficient times the feature\'s standard deviation' }, 'b × sd(x)'), ...infHeads)),
        h('tbody', {}, rows.map((c) => {
          const e = est.get(c.feature);
          return h('tr', { 'data-feature': c.feature },
            h('td', {}, c.feature), h('td', { 'data-value': String(c.value) }, fmt(c.value, 6)), h('td', {}, fmt(Math.abs(c.value), 6)),
            h('td', { 'data-col': 'standardized' }, sd ? fmt(c.value * sd[c.index], 4) : '—'),
            ...(inf ? [
              h('td', { 'data-col': 'se', 'data-value': e ? String(e.se) : '' }, e ? fmt(e.se, 4) : '—'),
              h('td', { 'data-col': 't' }, e ? fmt(e.t, 4) : '—'),
              h('td', { 'data-col': 'p', class: e && e.p_value < 0.05 ? 'ok' : '' }, e ? (e.p_value < 1e-4 ? '< 0.0001' : fmt(e.p_value, 2)) : '—'),
            ] : []));
        })))));
  }
  // The model's coefficients as a chart, in the path's units, each with its confidence
  // interval where the API gives one (a model refitted at k: `inference.coefficients[].ci_*`
  // at `summary.level`); at most CHART_COEFFICIENTS of them, the largest first.
  function coefficientChart(rows, est, inf, sd) {
    const CHART_COEFFICIENTS = 40;
    const std = units.standardized && sd;
    const scale = (c) => (std ? sd[c.index] : 1);
    const shown = rows.length > CHART_COEFFICIENTS
      ? rows.slice().sort((a, b) => Math.abs(b.value * scale(b)) - Math.abs(a.value * scale(a))).slice(0, CHART_COEFFICIENTS)
      : rows;
    const level = inf && inf.summary ? inf.summary.level : null;
    const pct = level ? String(Number((100 * level).toPrecision(10))) + ' %' : '';
    const items = shown.map((c) => {
      const e = est.get(c.feature);
      const k = scale(c);
      const ci = e && e.ci_lower !== undefined && e.ci_upper !== undefined ? [e.ci_lower * k, e.ci_upper * k] : [NaN, NaN];
      return {
        name: c.feature, value: c.value * k, lower: ci[0], upper: ci[1], colour: colour(c.index),
        title: c.feature + ': ' + fmt(c.value * k, 5) + (Number.isFinite(ci[0]) ? ', ' + pct + ' interval [' + fmt(ci[0], 5) + ', ' + fmt(ci[1], 5) + ']' : ''),
      };
    });
    const withCi = items.filter((it) => Number.isFinite(it.lower)).length;
    const chart = coefChart({
      items, label: 'Coefficients of the model' + (withCi ? ' with their ' + pct + ' confidence intervals' : ''),
      xLabel: std ? 'b × sd(x): per sd of the feature' : 'coefficient (original units)',
    });
    chart.id = 'coef-chart';
    const note = withCi
      ? 'Dots: the coefficients; bars: their ' + pct + ' confidence intervals (Student t, ' + fmt(inf.df_resid) + ' residual degrees of freedom)' +
        (inf.selective ? ', conditional on the Lasso\'s selection.' : inf.post_selection ? '; the support was chosen on the same rows, so the bars are too narrow.' : '.')
      : 'Dots: the coefficients. No confidence intervals: the API gives them with standard errors (choose by k).';
    return h('figure', { id: 'coef-figure', style: 'margin:8px 0' }, chart,
      h('figcaption', { class: 'muted', id: 'coef-note' }, note + (rows.length > shown.length ? ' The ' + shown.length + ' largest of ' + rows.length + ' shown.' : '')));
  }
  view.fail = (e) => { $('#model-error') ? $('#model-error').replaceChildren(errorBox(e)) : main.append(errorBox(e)); };
  return view;
}

// ---- one stream: change over time -------------------------------------------------------

function historyView(main, name) {
  let built = false;
  const view = {
    name: 'history',
    async update() {
      let st, hist, health;
      try {
        [st, hist, health] = await Promise.all([get('/v1/streams/' + enc(name)), get('/v1/streams/' + enc(name) + '/history'), healthInputs()]);
      } catch (e) {
        if (e.code === 'unknown_stream') { app.view = null; clearTimeout(app.timer); await unknownStream(main, 'stream', name); return; }
        throw e;
      }
      if (!built) {
        streamHeader(main, st, 'history');
        main.append(h('p', { class: 'muted' }, 'The default model (' + hist.method + ', k = ' + hist.k + ') every ' + hist.interval_ms / 1000 +
          ' s, the last ' + hist.length + ' points (kept in memory: empty after a restart).'),
        h('div', { id: 'alarm-summary' }),
        h('h2', {}, 'Prediction quality'), h('div', { id: 'quality-summary' }), h('div', { id: 'quality-box' }),
        h('h2', {}, 'Support and coefficients'), h('div', { id: 'heat-box' }),
        h('div', { class: 'grid2' },
          h('div', {}, h('h2', {}, 'alpha'), h('div', { id: 'alpha-box' })),
          h('div', {}, h('h2', {}, 'Effective sample size'), h('div', { id: 'ess-box' }))));
        built = true;
      }
      fillCards(st, health);
      draw(hist, st);
    },
  };
  function draw(hist, st) {
    const pts = hist.points;
    const alarms = [];
    pts.forEach((p, i) => {
      const before = i === 0 ? (p.alarms > 0 ? p.alarms - 1 : 0) : pts[i - 1].alarms;
      if (p.alarms > before) alarms.push(p);
    });
    $('#alarm-summary').replaceChildren(st.drift.alarms > 0 ?
      h('p', { class: 'alarm', id: 'alarm-text' }, st.drift.alarms + ' drift alarm' + (st.drift.alarms > 1 ? 's' : '') +
        (st.drift.last_alarm_row ? ', the last at row ' + fmt(st.drift.last_alarm_row) : '') + ' (dashed red lines below).') :
      h('p', { class: 'muted' }, st.schedule.startsWith('adaptive') ? 'No drift alarm so far.' : 'Drift alarms need the adaptive alpha schedule (this stream: ' + st.schedule + ').'));
    const marks = alarms.map((p) => ({
      x: p.time_ms / 1000, cls: 'alarm-mark', label: 'drift alarm (by row ' + fmt(p.last_alarm_row) + ')',
      attrs: { 'data-alarm': String(p.last_alarm_row), 'stroke-dasharray': '6 3' },
    }));
    $('#alpha-box').replaceChildren(lineChart({
      label: 'alpha over time', series: [{ name: 'alpha', colour: 'var(--accent)', points: pts.map((p) => [p.time_ms / 1000, p.alpha]) }],
      marks, xTime: true, xLabel: 'time', height: 220, empty: 'no history point yet',
    }));
    $('#ess-box').replaceChildren(lineChart({
      label: 'effective sample size over time', series: [{ name: 'effective sample size', colour: 'var(--pos)', points: pts.map((p) => [p.time_ms / 1000, p.effective_sample_size]) }],
      marks, xTime: true, xLabel: 'time', height: 220, yZero: true, empty: 'no history point yet',
    }));
    quality(pts, st, marks);
    heat(hist, alarms);
  }
  // Each row predicted before it is folded (docs/streams.md "Quality"): the window's main figure
  // over time (R² or AUC), with the drift alarms, and the figures now.
  function quality(pts, st, marks) {
    const q = st.quality;
    if (!q) {
      $('#quality-summary').replaceChildren(h('p', { class: 'muted' }, 'Quality is off for this stream (quality.enabled = false).'));
      $('#quality-box').replaceChildren();
      return;
    }
    const figure = st.task === 'classification' ? 'auc' : 'r2';
    const label = figure === 'auc' ? 'AUC' : 'R²';
    const w = q.figures.window;
    const floor = q.floor[figure];
    const below = floor !== undefined && w[figure] !== undefined && w[figure] < floor;
    $('#quality-summary').replaceChildren(h('div', { class: 'cards', id: 'quality-cards' },
      ...Object.keys(w).filter((k) => k !== 'rows').map((k) => card(k + ' (last ' + fmt(w.rows) + ' rows)', fmt(w[k]),
        { 'data-figure': k, class: 'card' + (k === figure && below ? ' alarm' : '') })),
      card('model at n', q.model_rows === null ? '–' : fmt(q.model_rows), { title: 'refit every ' + q.every_rows + ' rows' })),
      ...(q.model_note ? [h('p', { class: q.model_status === 'stale' ? 'alarm' : 'muted', id: 'quality-model-note' }, q.model_note)] : []),
      h('p', { class: 'muted' }, 'Each row is predicted by ' + q.model.method + ' re-extracted at p + 1, 2(p + 1), 4(p + 1), … rows, then every ' + fmt(q.every_rows) +
        ' rows, before it is folded; window ' + fmt(q.window_rows) + ' rows' + (floor !== undefined ? ', floor ' + label + ' ' + fmt(floor) : '') +
        (q.unscored_rows > 0 ? '; ' + fmt(q.unscored_rows) + ' rows before the first model are counted apart' : '') + '.'));
    const series = [{ name: label + ' of the window', colour: 'var(--accent)',
      points: pts.filter((p) => p.quality && p.quality[figure] !== undefined).map((p) => [p.time_ms / 1000, p.quality[figure]]) }];
    if (floor !== undefined && pts.length > 0) {
      series.push({ name: 'floor', colour: 'var(--bad)', points: [[pts[0].time_ms / 1000, floor], [pts[pts.length - 1].time_ms / 1000, floor]] });
    }
    $('#quality-box').replaceChildren(lineChart({
      label: label + ' of the prequential window over time', series, marks, xTime: true, xLabel: 'time', height: 220,
      empty: 'no quality figure yet',
    }));
  }
  function heat(hist, alarms) {
    const box = $('#heat-box');
    // At most 240 columns: the newest points, thinned evenly.
    const all = hist.points;
    const step = Math.max(1, Math.ceil(all.length / 240));
    const pts = all.filter((_, i) => (all.length - 1 - i) % step === 0);
    const order = [];
    const seen = new Set();
    for (const p of pts) for (const j of p.support) if (!seen.has(j)) { seen.add(j); order.push(j); }
    if (pts.length === 0) { box.replaceChildren(h('p', { class: 'muted' }, 'No history point yet: the first comes within ' + hist.interval_ms / 1000 + ' s of the first rows.')); return; }
    let max = 0;
    for (const p of pts) for (const c of p.coefficients) max = Math.max(max, Math.abs(c));
    const L = 90, cw = Math.max(3, Math.min(24, 620 / pts.length)), rh = 14;
    const W = L + cw * pts.length + 8, H = rh * order.length + 24;
    // Drawn at its own size (a few points stay narrow), shrunk to fit a narrow screen.
    const svg = s('svg', { class: 'chart', id: 'heat-strip', viewBox: '0 0 ' + W + ' ' + H, role: 'img',
      style: 'width:' + W + 'px;max-width:100%',
      'aria-label': 'Support and coefficients of the default model over time: one row per feature, one column per point' });
    order.forEach((j, r) => {
      svg.append(s('text', { x: L - 4, y: r * rh + 11, 'text-anchor': 'end' }, hist.features[j]));
    });
    pts.forEach((p, c) => {
      const val = new Map(p.support.map((j, i) => [j, p.coefficients[i]]));
      order.forEach((j, r) => {
        const v = val.get(j) || 0;
        const a = max > 0 ? Math.abs(v) / max : 0;
        const fill = v === 0 ? 'transparent' : (v > 0 ? 'rgba(217,72,15,' : 'rgba(28,100,209,') + (0.15 + 0.85 * a).toFixed(3) + ')';
        svg.append(s('rect', { x: L + c * cw, y: r * rh, width: cw - 0.5, height: rh - 1, fill },
          s('title', {}, hist.features[j] + ' at n = ' + p.n + ': ' + fmt(v))));
      });
    });
    const t0 = pts[0].time_ms, t1 = pts[pts.length - 1].time_ms;
    for (const a of alarms) {
      const c = pts.findIndex((p) => p.time_ms >= a.time_ms);
      if (c >= 0) svg.append(s('line', { class: 'alarm-mark', x1: L + c * cw, x2: L + c * cw, y1: 0, y2: H - 20, 'stroke-dasharray': '6 3' }));
    }
    svg.append(s('text', { x: L, y: H - 6 }, new Date(t0).toLocaleTimeString()),
      s('text', { x: W - 8, y: H - 6, 'text-anchor': 'end' }, new Date(t1).toLocaleTimeString()));
    box.replaceChildren(svg, h('p', { class: 'muted' }, 'Orange: positive, blue: negative; darker is larger. Hover a cell for its value.'));
  }
  return view;
}

// ---- a feature stream -------------------------------------------------------------------

function featureView(main, name) {
  let built = false;
  const view = {
    name: 'feature',
    async update() {
      let f;
      try { f = await get('/v1/feature-streams/' + enc(name)); }
      catch (e) {
        if (e.code === 'unknown_stream') { app.view = null; clearTimeout(app.timer); await unknownStream(main, 'feature stream', name); return; }
        throw e;
      }
      if (!built) { build(f); built = true; }
      draw(f);
    },
  };
  function build(f) {
    loaded();
    main.append(h('h1', {}, f.name, h('span', { class: 'muted' }, ' · feature stream, ' + f.method + ', loss ' + f.loss_name)),
      h('div', { class: 'cards', id: 'feature-cards' }),
      h('div', { class: 'grid2' },
        h('div', {}, h('h2', {}, 'Selected features'), h('div', { id: 'weights-box' })),
        h('div', {}, h('h2', {}, 'Loss per pass'), h('div', { id: 'loss-box' }))),
      h('h2', {}, 'Asy-OS workers'), h('div', { id: 'workers-box' }),
      h('h2', {}, 'Labels'), h('div', { id: 'labels-box' }));
  }
  function draw(f) {
    $('#feature-cards').replaceChildren(card('labels', f.labels ? 'received (n = ' + f.n + ')' : 'waiting for labels', { 'data-col': 'labels' }),
      card('features seen', fmt(f.features_seen), { 'data-col': 'n' }), card('passes', fmt(f.passes)),
      card('selected / s', f.selected_count + ' / ' + f.s), card('loss L(u)', fmt(f.loss)), card('step size eta', fmt(f.eta)),
      card('last update', age(f.last_update_ms)));
    const sel = f.selected || [];
    const W = 420, rh = 18, L = 90, H = Math.max(40, sel.length * rh + 8);
    const max = Math.max(1e-12, ...sel.map((x) => Math.abs(x.weight)));
    const mid = L + (W - L - 10) / 2;
    const bars = s('svg', { class: 'chart', id: 'weights-chart', viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': 'Weights of the selected features' },
      s('line', { class: 'axis', x1: mid, x2: mid, y1: 0, y2: H }),
      sel.map((x, i) => {
        const w = (Math.abs(x.weight) / max) * (W - L - 10) / 2;
        return s('g', {}, s('text', { x: L - 4, y: i * rh + 14, 'text-anchor': 'end' }, x.name),
          s('rect', { x: x.weight >= 0 ? mid : mid - w, y: i * rh + 3, width: Math.max(1, w), height: rh - 6, fill: x.weight >= 0 ? 'var(--pos)' : 'var(--neg)' },
            s('title', {}, x.name + ': weight ' + fmt(x.weight) + ', coefficient ' + fmt(x.coefficient))));
      }));
    $('#weights-box').replaceChildren(sel.length ? bars : h('p', { class: 'muted' }, f.labels ? 'Nothing selected yet.' : 'Nothing is selected before the labels arrive.'),
      sel.length ? h('div', { class: 'scroll' }, h('table', { id: 'selected-table' },
        h('thead', {}, h('tr', {}, h('th', {}, 'Feature'), h('th', {}, 'weight (standardized)'), h('th', {}, 'coefficient'), h('th', {}, 'worker'))),
        h('tbody', {}, sel.map((x) => h('tr', { 'data-feature': x.name }, h('td', {}, x.name), h('td', {}, fmt(x.weight)), h('td', {}, fmt(x.coefficient)), h('td', {}, x.worker)))))) : '');
    $('#loss-box').replaceChildren(lineChart({
      label: 'loss at the end of each pass', series: [{ name: 'loss', colour: 'var(--accent)', points: f.loss_per_pass.map((v, i) => [i + 1, v]) }],
      xLabel: 'pass', xInteger: true, height: 220, empty: 'no pass completed yet',
    }));
    $('#workers-box').replaceChildren(f.workers > 1 ? h('div', { class: 'scroll' }, h('table', { id: 'workers-table' },
      h('thead', {}, h('tr', {}, h('th', {}, 'worker'), h('th', {}, 'steps'), h('th', {}, 'mean staleness'), h('th', {}, 'max staleness'))),
      h('tbody', {}, f.staleness.map((w) => h('tr', {}, h('td', {}, w.worker), h('td', {}, fmt(w.steps)), h('td', {}, fmt(w.mean)), h('td', {}, fmt(w.max)))))))
      : h('p', { class: 'muted' }, 'One worker: online substitution (OS) without threads; Asy-OS runs with workers > 1.'));
    labels(f);
  }
  function labels(f) {
    const box = $('#labels-box');
    if (box.contains(document.activeElement)) return; // do not redraw under a person typing
    const state = h('p', {}, f.labels ? 'Labels received for n = ' + f.n + ' samples.' : 'Waiting for the labels (n = ' + f.n + ' values).');
    if (!app.token) { box.replaceChildren(state, h('p', { class: 'muted' }, 'Read-only: enter the service\'s token above to replace the labels.')); return; }
    const ta = h('textarea', { id: 'labels-input', rows: 3, cols: 40, placeholder: 'JSON array of ' + f.n + ' numbers' });
    const out = h('div', { 'aria-live': 'polite' });
    const form = h('form', { class: 'controls' }, h('label', { for: 'labels-input' }, 'new labels', ta),
      h('button', { type: 'submit', class: 'primary' }, 'Send labels'));
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      let labels;
      try { labels = JSON.parse(ta.value); } catch (e) { out.replaceChildren(errorBox({ code: 'invalid_json', message: 'The labels must be a JSON array of numbers.' })); return; }
      try {
        const r = await call('PUT', '/v1/feature-streams/' + enc(f.name) + '/labels', { labels });
        out.replaceChildren(h('p', {}, 'Labels ' + r.status + '.'));
      } catch (e) { out.replaceChildren(errorBox(e)); }
    });
    box.replaceChildren(state, form, out);
  }
  return view;
}

// ---- declaring a stream -----------------------------------------------------------------

// A form that declares a stream (PUT /v1/streams/{name}) with its fields proposed from the
// topic's latest messages (GET /v1/topics/{topic}/fields): each path a feature or the target.
// Both need the admin token (http.admin_token), typed in here and kept for the tab only.
function declareView(main) {
  loaded();
  const admin = h('input', { id: 'declare-admin', type: 'password', autocomplete: 'off',
    value: sessionStorage.getItem('ravel.admin') || '' });
  const topic = h('input', { id: 'declare-topic', required: true, placeholder: 'orders' });
  const format = h('select', { id: 'declare-format' },
    [['', 'JSON events'], ['avro', 'Avro (Schema Registry)'], ['protobuf', 'Protobuf (Schema Registry)'],
      ['json-schema', 'JSON Schema (Schema Registry)']].map(([v, t]) => h('option', { value: v }, t)));
  const sampleOut = h('div', { id: 'declare-fields', 'aria-live': 'polite' });
  const sample = h('form', { class: 'controls', id: 'declare-sample' },
    h('label', { for: 'declare-admin' }, 'admin token', admin),
    h('label', { for: 'declare-topic' }, 'topic', topic),
    h('label', { for: 'declare-format' }, 'format', format),
    h('button', { type: 'submit', class: 'primary' }, 'Read its latest messages'));
  main.append(h('h1', {}, 'Declare a stream'),
    h('p', { class: 'muted' }, 'Reads the topic\'s latest messages (never committed) and proposes their numeric ' +
      'fields as features; pick the target, name the stream and declare it. The service keeps it across restarts.'),
    sample, sampleOut);
  sample.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    sessionStorage.setItem('ravel.admin', admin.value.trim());
    const q = '?events=100' + (format.value ? '&format=' + enc(format.value) : '');
    sampleOut.replaceChildren(h('p', { class: 'muted' }, 'Reading…'));
    try {
      const f = await call('GET', '/v1/topics/' + enc(topic.value.trim()) + '/fields' + q, undefined, false, admin.value.trim());
      sampleOut.replaceChildren(...proposal(f));
    } catch (e) { sampleOut.replaceChildren(errorBox(e)); }
  });
  function proposal(f) {
    const proposed = new Set(f.proposal.features);
    const summary = h('p', { id: 'declare-summary' }, f.events + ' of the ' + f.sampled + ' latest messages are events' +
      (f.unreadable ? '; ' + f.unreadable + ' not (' + (f.first_unreadable || '') + ')' : '') + '.');
    if (f.fields.length === 0) return [summary];
    const rows = f.fields.map((x) => h('tr', { 'data-path': x.path },
      h('td', {}, h('code', {}, x.path)), h('td', {}, x.kind), h('td', {}, fmt(x.seen)),
      h('td', {}, h('input', { type: 'checkbox', name: 'feature', value: x.path, 'aria-label': x.path + ' is a feature',
        checked: proposed.has(x.path) })),
      h('td', {}, h('input', { type: 'radio', name: 'target', value: x.path, 'aria-label': x.path + ' is the target',
        disabled: x.kind !== 'number' && x.kind !== 'boolean', checked: x.path === f.proposal.target })),
      h('td', { class: 'muted' }, x.left_out || '')));
    const table = h('table', { id: 'declare-table' },
      h('thead', {}, h('tr', {}, ['field', 'kind', 'in events', 'feature', 'target', 'not proposed because'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, rows));
    const name = h('input', { id: 'declare-name', required: true, pattern: '[A-Za-z0-9._-]+',
      value: f.topic.replace(/[^A-Za-z0-9._-]/g, '-') });
    const start = h('select', { id: 'declare-start' },
      [['earliest', 'every message it holds'], ['latest', 'messages from now on'], ['time', 'messages from a time']]
        .map(([v, t]) => h('option', { value: v }, t)));
    const at = h('input', { id: 'declare-at', type: 'datetime-local', hidden: true });
    start.addEventListener('change', () => { at.hidden = start.value !== 'time'; });
    const out = h('div', { id: 'declare-result', 'aria-live': 'polite' });
    const form = h('form', { class: 'controls', id: 'declare-form' },
      h('label', { for: 'declare-name' }, 'stream name', name),
      h('label', { for: 'declare-start' }, 'start', start, at),
      h('button', { type: 'submit', class: 'primary' }, 'Declare'));
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const target = table.querySelector('input[name=target]:checked');
      if (!target) { out.replaceChildren(errorBox({ code: 'no_target', message: 'Pick the field that holds y (target).' })); return; }
      const features = [...table.querySelectorAll('input[name=feature]:checked')].map((c) => c.value)
        .filter((p) => p !== target.value);
      const decl = { topic: f.topic, features, target: target.value };
      if (f.proposal.format) decl.format = f.proposal.format;
      if (start.value === 'latest') decl.start = 'latest';
      if (start.value === 'time' && at.value) decl.start = new Date(at.value).toISOString();
      try {
        const r = await call('PUT', '/v1/streams/' + enc(name.value), decl, false, admin.value.trim());
        out.replaceChildren(h('p', { id: 'declare-done' }, 'Stream ', h('a', { href: '#/streams/' + enc(r.name) }, r.name),
          ' ' + r.outcome + ': ' + features.length + ' features, target ' + decl.target + '.' +
          (r.fields_check ? ' ' + r.fields_check.note : '')));
      } catch (e) { out.replaceChildren(errorBox(e)); }
    });
    return [summary, table, form, out];
  }
  return { name: 'declare', async update() {} };
}

// ---- start ------------------------------------------------------------------------------

function tokenState() {
  $('#token-state').textContent = app.token ? 'writes allowed with this token' : 'read-only';
}
document.addEventListener('DOMContentLoaded', () => {
  $('#token-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    app.token = $('#token').value.trim();
    if (app.token) sessionStorage.setItem('ravel.token', app.token); else sessionStorage.removeItem('ravel.token');
    $('#token').value = '';
    tokenState();
    route();
  });
  tokenState();
  window.addEventListener('hashchange', route);
  route();
});
