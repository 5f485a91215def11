// The Query inspector's step-through flips its queries in the browser (viz/query_flip.py): the figure comes with
// the rows of every query of its head (`lens_rows`) and a plotly slider whose steps do nothing by themselves
// (method "skip"). When a step is chosen, this fills that query's row into the traces with one Plotly.update,
// the way viz/query_frames.py `fill` does on the server: bars "q·k", "scaled", "weight" (blocked keys grey, their
// weight blank), "×" markers "masked", the heatmap "contributions" α_ij v_j (computed here: weights[i, j] *
// values[j, d], float64, rounded to float32 where the server's figure holds float32) and the column "output"
// (summed on the server), and the title. No server round trip.

const TYPES = { f8: Float64Array, f4: Float32Array, u1: Uint8Array }; // viz/query_flip.py rows_spec; f4: ui/narrow.py

function array(spec) {
  // plotly's typed array spec, its bdata an ArrayBuffer of its own (chart.js `unpack`)
  return new TYPES[spec.dtype](spec.bdata);
}

export function readRows(spec) {
  const rows = { ...spec };
  for (const name of ["scores", "scaled", "weights", "blocked", "values", "output"]) rows[name] = array(spec[name]);
  return rows;
}

// Query i's update: [restyle, relayout, trace indices] for Plotly.update.
export function rowUpdate(rows, data, i) {
  const S = rows.keys;
  const E = rows.dims;
  const at = (name) => data.findIndex((trace) => trace.name === rows.traces[name]);
  const slice = (a) => a.subarray(i * S, (i + 1) * S);
  const blocked = slice(rows.blocked);
  const weights = slice(rows.weights);
  const colours = Array.from(blocked, (b) => rows.colours[b ? 1 : 0]);
  const shown = Float64Array.from(weights, (w, j) => (blocked[j] ? NaN : w));
  const round = rows.float32 ? Math.fround : (x) => x;
  const contributions = new Array(E); // (Ev, S): α_ij v_j, rows = value dims
  for (let d = 0; d < E; d++) {
    const row = (contributions[d] = new (rows.float32 ? Float32Array : Float64Array)(S));
    for (let j = 0; j < S; j++) row[j] = round(weights[j] * rows.values[j * E + d]);
  }
  const output = Array.from(rows.output.subarray(i * E, (i + 1) * E), (o) => [o]); // (Ev, 1)
  const masked = [];
  blocked.forEach((b, j) => b && masked.push(j));
  const texts = rows.texts ? rows.texts[i] : null;
  const traces = [];
  const restyle = { y: [], x: [], z: [], text: [], "marker.color": [] };
  const add = (name, values) => {
    const index = at(name);
    if (index < 0) return;
    traces.push(index);
    for (const key of Object.keys(restyle)) restyle[key].push(values[key]); // undefined: left as it is
  };
  const written = (name, k) => (texts && data[at(name)] && data[at(name)].text !== undefined ? texts[k] : undefined);
  add("scores", { y: slice(rows.scores), "marker.color": colours, text: written("scores", 0) });
  add("scaled", { y: slice(rows.scaled), "marker.color": colours, text: written("scaled", 1) });
  add("weights", { y: shown, text: written("weights", 2) });
  add("masked", { x: masked, y: masked.map(() => 0) });
  add("contributions", { z: contributions });
  add("output", { z: output });
  return [restyle, { "title.text": rows.titles[i] }, traces];
}

// Rows by their digest, for every chart of the page: the server sends a chart's rows once and names them by their
// digest afterwards (ui/chart.py remembers ROWS_REMEMBERED per chart; the page keeps more). Read on first use.
const KEPT_ROWS = 6;
const kept = new Map(); // digest -> {read, rows}, oldest first

export function remember(digest, read) {
  if (kept.has(digest)) return;
  kept.set(digest, { read, rows: null });
  while (kept.size > KEPT_ROWS) kept.delete(kept.keys().next().value);
}

function lookup(digest) {
  const entry = kept.get(digest);
  if (!entry) return null;
  entry.rows ||= readRows(entry.read());
  return entry.rows;
}

function ask(div, digest) {
  // Once per digest and chart: ui/chart.py's "rows" trigger makes the next figure carry them.
  if (!digest || div.__lensAskedRows === digest || !div.__lensComponent) return;
  div.__lensAskedRows = digest;
  div.__lensComponent.setTriggerValue("rows", digest);
}

// What a chart shows after a figure with rows is drawn or a query is flipped to: its frame, its rows and the query
// ("frame|digest|query", null for a chart without rows). A figure that would show the same is not drawn again
// (`showsAlready`): the query box's pick, flipped in the page at once (`follow`), is not redrawn when the server's
// figure for it comes.
const showing = (named, query) => (named && named.digest ? `${named.frame}|${named.digest}|${query}` : null);
const startOf = (figure) => ((figure && figure.layout && figure.layout.sliders) || [])[0]?.active;

export function showsAlready(div, figure) {
  const shows = showing(figure && figure.lens_rows, startOf(figure));
  return shows !== null && div.__lensShows === shows && div.classList.contains("js-plotly-plot");
}

// A figure of the frame and rows on screen for another query (the server fills a kept frame with that query's row
// the same way: viz/query.py): flipped to here, not drawn. Should the server's figure for a pick in the box come
// before the page flips to it (follow.js flips once the closing list is painted; a busy machine paints late), it
// is not drawn over the chart. False when it is not such a figure or the rows are not here (then it is drawn).
export function flipsTo(div, figure) {
  const named = figure && figure.lens_rows;
  const shown = div.__lensNamed;
  if (!named || !shown || named.frame !== shown.frame || named.digest !== shown.digest) return false;
  if (!div.classList.contains("js-plotly-plot") || typeof div.__lensFlipTo !== "function") return false;
  return div.__lensFlipTo(startOf(figure));
}

function flip(div, i, Plotly, moveSlider) {
  // Query i's row into the traces, from the rows the figure drawn last names; false when they are not here.
  const named = div.__lensNamed;
  const rows = named && lookup(named.digest); // (rows asked for may have come since)
  if (!rows) ask(div, named && named.digest);
  if (!rows || !Number.isInteger(i) || i < 0 || i >= rows.queries) return false;
  if (div.__lensShows === showing(named, i)) return true;
  const [restyle, relayout, traces] = rowUpdate(rows, div.data, i);
  if (moveSlider) relayout["sliders[0].active"] = i; // a pick in the box: the slider's handle follows
  div.__lensShows = showing(named, i);
  div.__lensQuery = i;
  const drawn = Plotly.update(div, restyle, relayout, traces);
  readout(div);
  if (drawn && drawn.then) drawn.then(() => readout(div));
  return true;
}

// A long slider's steps have no label (viz/query_flip.py `with_flip`): its current value is "query " and, as its
// suffix, the query the figure was drawn for. plotly.js writes that text whenever it draws the slider (each step
// of a drag, a box pick, a resize), so the query shown is written over it here after each flip and each redraw:
// the same words the server's figure for that query has. A short slider (no suffix) says its step's own label.
export function readout(div) {
  const sliders = div.layout && div.layout.sliders;
  const value = sliders && sliders[0] && sliders[0].currentvalue;
  if (!value || value.suffix == null || !Number.isInteger(div.__lensQuery)) return;
  const text = div.querySelector(".slider-group > text.slider-label"); // the current value (it has the labels' class)
  const said = `${value.prefix || ""}${div.__lensQuery}`;
  if (text && text.textContent !== said) text.textContent = said;
}

// Listen to the chart's slider: each chosen step fills its query from the rows the figure drawn last names. Checked
// after every draw, like chart.js's clicks: a chart purged and drawn again has lost its handlers. Rows the page does
// not have (their message replaced by a newer one before it left the server) are asked for, once: the server sends
// them with the next figure. `div.__lensFlipTo(i)` flips to query i from elsewhere (the query box: `follow`).
export function attach(div, figure, Plotly) {
  const named = (div.__lensNamed = (figure && figure.lens_rows) || null);
  div.__lensShows = showing(named, startOf(figure));
  div.__lensQuery = startOf(figure);
  if (!div.__lensShows) return;
  if (!lookup(named.digest)) ask(div, named.digest);
  div.__lensOnSlider ||= (event) => flip(div, Number(event && event.step && event.step.value), Plotly, false);
  div.__lensFlipTo ||= (i) => flip(div, i, Plotly, true);
  div.__lensReadout ||= () => readout(div);
  const listens = (name, handler) => div._ev && div._ev.listeners && div._ev.listeners(name).includes(handler);
  if (!listens("plotly_sliderchange", div.__lensOnSlider)) div.on("plotly_sliderchange", div.__lensOnSlider);
  for (const drawn of ["plotly_afterplot", "plotly_relayout"]) {
    if (!listens(drawn, div.__lensReadout)) div.on(drawn, div.__lensReadout); // the slider drawn again
  }
}
