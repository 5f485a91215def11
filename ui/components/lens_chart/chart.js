// One plotly chart that stays on the page across reruns (ui/chart.py, issue 12).
//
// Streamlit's own chart element is replaced by a new one whenever its figure changes: a new <div>, a
// first Plotly.newPlot and then a second full draw when its theme effect runs. This component keeps
// its <div> for as long as its key stays on the page and draws each new figure into it with
// Plotly.react, once. An unchanged figure (a rerun that sent the same bytes) draws nothing.
//
// What arrives from Python (`data`): the figure packed by ui/plotly_spec.py `pack`: plotly.py's own JSON
// for it (to_json(fig.to_dict(), validate=False)) with each typed array's bytes after the JSON instead of
// base64 inside it, and a digest of the whole; or plain JSON text or bytes (a figure made on the fly).
// A packed figure may be followed by an update, [restyle, relayout], that marks the chosen head on a figure
// kept for every head (viz/selection.py): it is applied with Plotly.update to the chart already drawn, so a
// head change redraws a title or an outline, not the figure.
// The Query inspector's step-through comes with the rows of every query of its head, packed after it ("LNS2",
// once per page: later figures name them by their digest); query_rows.js keeps them and fills the row its slider
// chooses (viz/query_flip.py).
// plotly.js is served by this app's own server (no CDN): the app's own bundle in static/ (scatter, bar,
// heatmap), else the plotly package's full one (ui/plotly_js.py).

// This module is imported once per page by the small loader that ui/chart.py registers (loader.js),
// which hands over the settings (where plotly.js may be fetched from, best first, and the modebar's
// configuration) and the load of plotly.js it started when the page's first chart mounted.

import { follow } from "./follow.js";
import { withUpdate } from "./marks.js";
import { attach as attachRows, flipsTo, remember as rememberRows, showsAlready } from "./query_rows.js";

const decoder = new TextDecoder();
let loading = null; // one load of plotly.js for the whole page: {route, plotly}
let full = null; // the full bundle, loaded only for a figure whose trace types the first one lacks
// From the loader (loader.js): {script(base, route), first}: how plotly.js is fetched, and the page's first load
// of it, which the loader started as soon as the first chart mounted.
let load = null;

function retryable(promise, forget) {
  promise.catch(forget); // the next figure tries again
  return promise;
}

function plotly(settings, base, types) {
  if (!loading) {
    // The load the loader started (the best route: the app's bundle, a quarter of the size); should it fail,
    // every route in turn, best first (the full bundle last).
    loading = retryable(
      settings.plotly.reduce((tried, route) => tried.catch(() => load.script(base, route)), load.first),
      () => (loading = null),
    );
  }
  return loading.then((loaded) => {
    const lacking = settings.types && loaded.route !== settings.full && types.some((t) => !settings.types.includes(t));
    if (!lacking && !full) return loaded.plotly;
    if (!full) full = retryable(load.script(base, settings.full), () => (full = null));
    return full.then((f) => f.plotly);
  });
}

function bytesOf(data) {
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return null;
}

const MAGIC = [0x4c, 0x4e, 0x53, 0x31]; // "LNS1": a packed figure (ui/plotly_spec.py)
const MAGIC_ROWS = [0x4c, 0x4e, 0x53, 0x32]; // "LNS2": a packed figure, then the rows it names (ui/plotly_spec.py with_rows)

// What arrived, as {key, figureKey, read, update}: `figureKey` says whether it is the figure already drawn (a
// packed figure's digest, else the JSON text itself), `key` whether anything changed (the figure or its update);
// `read()` gives the figure, `update` the [restyle, relayout] to apply after it (or null). null when nothing
// came (the preload chart). `rows`: a step-through's rows that came with it ({digest, read}), else null.

function received(data) {
  if (typeof data === "string") return data ? whole(data) : null;
  let bytes = bytesOf(data);
  if (!bytes || !bytes.length) return null;
  let rows = null;
  if (bytes.length >= 8 && MAGIC_ROWS.every((b, i) => bytes[i] === b)) {
    // a step-through's rows (viz/query_flip.py): remembered by their digest, read when a slider first needs them
    const length = lengthAt(bytes);
    const part = bytes.subarray(8 + length);
    const meta = metaOf(part);
    rows = { digest: meta.digest, read: () => unpack(part, meta).rows };
    bytes = bytes.subarray(8, 8 + length);
  }
  const arrived = packedOrWhole(bytes);
  arrived.rows = rows;
  return arrived;
}

function lengthAt(bytes) {
  // the u32 after the 4 magic bytes: the meta's length ("LNS1") or the figure's ("LNS2")
  return new DataView(bytes.buffer, bytes.byteOffset + 4, 4).getUint32(0, true);
}

function metaOf(packed) {
  // the meta JSON of a packed figure ("LNS1"): its digest, where the figure and its buffers are
  return JSON.parse(decoder.decode(packed.subarray(8, 8 + lengthAt(packed))));
}

function packedOrWhole(bytes) {
  if (bytes.length < 8 || MAGIC.some((b, i) => bytes[i] !== b)) return whole(decoder.decode(bytes));
  const meta = metaOf(bytes);
  const end = meta.end ?? bytes.length;
  const text = end < bytes.length ? decoder.decode(bytes.subarray(end)) : "";
  const figureKey = "packed:" + meta.digest;
  return { key: figureKey + "|" + text, figureKey, read: () => unpack(bytes, meta), update: text ? JSON.parse(text) : null };
}

function whole(text) {
  return { key: text, figureKey: text, read: () => JSON.parse(text), update: null };
}

function unpack(bytes, meta) {
  // plotly.js reads a typed array spec's bdata as an ArrayBuffer as well as base64: each buffer goes back
  // where its path says, as its own ArrayBuffer (a copy, so that every typed array view starts aligned).
  const [start, size] = meta.figure;
  const figure = JSON.parse(decoder.decode(bytes.subarray(start, start + size)));
  for (const [path, offset, length] of meta.buffers) {
    let spec = figure;
    for (const step of path) spec = spec[step];
    spec.bdata = bytes.buffer.slice(bytes.byteOffset + offset, bytes.byteOffset + offset + length);
  }
  // hover labels sent once per row or column (ui/label_grids.py take_label_grids): each cell's customdata again
  for (const [index, rows, cols, layers] of meta.grids || []) figure.data[index].customdata = labelGrid(rows, cols, layers);
  return figure;
}

function labelGrid(rows, cols, layers) {
  const grid = new Array(rows);
  for (let r = 0; r < rows; r++) {
    const row = (grid[r] = new Array(cols));
    for (let c = 0; c < cols; c++) row[c] = layers.map(([axis, labels]) => (axis === "rows" ? labels[r] : labels[c]));
  }
  return grid;
}

function say(div, message) {
  div.textContent = message;
  div.style.color = "#b00020";
  div.style.padding = "0.5rem";
}

function fullScreenButton(div) {
  return {
    name: "Full screen",
    icon: {
      width: 24,
      height: 24,
      path: "M3 3h7v2H5v5H3zm11 0h7v7h-2V5h-5zM3 14h2v5h5v2H3zm16 0h2v7h-7v-2h5z",
    },
    click: () => {
      if (document.fullscreenElement) document.exitFullscreen();
      else if (div.requestFullscreen) div.requestFullscreen();
    },
  };
}

function onFullScreen(div) {
  // Full screen: the figure takes the whole screen; back on the page: its own size again.
  const Plotly = window.Plotly;
  if (!Plotly || !div.__lensLayout) return;
  const own = div.__lensLayout;
  if (document.fullscreenElement === div) {
    div.style.background = own.paper_bgcolor || "white";
    Plotly.relayout(div, { width: window.innerWidth, height: window.innerHeight });
  } else {
    div.style.background = "";
    Plotly.relayout(div, { width: own.width ?? null, height: own.height ?? null, autosize: true });
  }
}

function listenForClicks(div) {
  // A clicked point goes back to Python as the "click" trigger (ui.chart.draw(..., on_click=...)).
  div.__lensOnClick ||= (event) => {
    const point = event && event.points && event.points[0];
    if (point && div.__lensComponent) {
      div.__lensComponent.setTriggerValue("click", { x: point.x, y: point.y, trace: point.data.name ?? null });
    }
  };
  const listening = div._ev && div._ev.listeners && div._ev.listeners("plotly_click").includes(div.__lensOnClick);
  if (!listening) div.on("plotly_click", div.__lensOnClick);
}

function parse(div, arrived) {
  // The figure, with the page's room for it kept from now on (also while it waits to be drawn).
  let figure;
  try {
    figure = arrived.read();
  } catch (err) {
    say(div, "This chart could not be read: " + err.message);
    return null;
  }
  const height = (figure.layout || {}).height;
  div.style.minHeight = (height || 450) + "px"; // 450: plotly's own default height
  return figure;
}

function draw(div, figure, update, token, settings, base) {
  // `figure` null: the figure drawn stays, only `update` is applied to it (a head change on a figure kept for
  // every head). A new figure and its update: the update is put into the figure, which is drawn once (withUpdate).
  const marking = !!(figure && update);
  if (marking) {
    figure = withUpdate(figure, update);
    update = null;
  }
  const layout = (figure && figure.layout) || {};
  const types = ((figure && figure.data) || []).map((trace) => trace.type || "scatter");
  plotly(settings, base, types)
    .then((Plotly) => {
      if (div.__lensToken !== token) return; // a newer figure arrived meanwhile: that one is drawn
      const marked = () => {
        if (div.__lensToken !== token) return undefined;
        div.style.opacity = ""; // no longer an older figure
        if (div.dataset.click) listenForClicks(div);
        return undefined;
      };
      const apply = () => (update && div.__lensToken === token ? Plotly.update(div, update[0], update[1]) : null);
      if (!figure) return Promise.resolve(apply()).then(marked);
      // a step-through's query, flipped to in the page already (or now: another query of the rows it shows)
      if (!marking && (showsAlready(div, figure) || flipsTo(div, figure))) return Promise.resolve(marked());
      div.__lensLayout = { width: layout.width, height: layout.height, paper_bgcolor: layout.paper_bgcolor };
      // One config object per chart: Plotly.react starts over (a new plot, its handlers dropped) when the
      // config it is given is not the one it drew with.
      div.__lensConfig ||= { ...settings.config, responsive: true, modeBarButtonsToAdd: [fullScreenButton(div)] };
      if (div.textContent && !div.classList.contains("js-plotly-plot")) div.textContent = "";
      div.__lensDraws = (div.__lensDraws || 0) + 1; // figures drawn here (tests count them)
      return Plotly.react(div, figure.data || [], layout, div.__lensConfig)
        .then(() => attachRows(div, figure, Plotly)) // a step-through's queries (query_rows.js)
        .then(marked);
    })
    .catch((err) => say(div, "This chart could not be drawn: " + err.message));
}

// What is on screen, or within half a screen of it, is drawn; a chart further away keeps its older figure, faded
// (or its room, empty), and is drawn when it comes near (the watcher), or at once when the page is printed. It used
// to be drawn also once the person had paused for a second: with ten browsers on one two-core machine that redrew
// every chart of the derivation after each click, and a click's answer took a quarter longer (10 pages x 40 s:
// 95-100 updates, p50 3.7-4.1 s, against 126-131 and 2.7-3.0 s).
// A chart hidden with its view (a view kept in the page while another is shown, or drawn ahead of a switch to it:
// ui/ahead.py) is laid out at its size but invisible: it is drawn while the browser is idle, one chart at a time
// (`later`), so that a switch to its view finds it drawn; should it be shown first, the watcher draws it.
// The page's very first chart is drawn as it arrives, wherever it is: at 512 tokens the derivation's first chart
// (the softmax weights) sits below the first screen; waiting for an idle moment, it waited for the rest of the
// page (a hundred more messages, React mounting each): it arrived 2.1-2.6 s after the link was opened and was
// drawn at 3.3-3.5 s.
const NEAR_FRACTION = 0.5; // of the screen's height, above and below it
const NEAR = `${NEAR_FRACTION * 100}% 0px`;
const STALE_OPACITY = "0.35";
let watcher = null;
let startedAny = false; // a chart of this page has been sent to plotly (flush)

function hidden(div) {
  // In a view kept in the page, not shown: ui/ahead.py's HIDDEN_STYLE sets this (inherited) property on its box.
  return getComputedStyle(div).getPropertyValue("--lens-hidden").trim() === "1";
}

function flush(div, idle = false) {
  const pending = div.__lensPending;
  // Not on the page (its view was switched away while it waited): nothing to draw. Drawing into a detached
  // <div> cost the next view's click its time (three of Heads & layers' charts, drawn while the Query inspector
  // was opening). Kept pending: the watcher draws it should the same <div> come back.
  if (!pending || !div.isConnected) return;
  // Not laid out (in a closed expander): drawn when it is shown, by the watcher.
  if (!div.getClientRects().length) return;
  // In a view kept hidden: drawn while the browser is idle, not now (while the view shown opens, five of Heads &
  // layers' charts drawn during a switch to the Query inspector took it from 0.44 to 1.3 s).
  if (!idle && hidden(div)) {
    later(div);
    return;
  }
  div.__lensPending = null;
  startedAny = true;
  draw(div, pending.figure, pending.update, pending.token, pending.settings, pending.base);
}

// Charts of views kept hidden, drawn one per idle moment of the browser (a chart takes tens of milliseconds: a
// click waits at most one of them). A chart shown meanwhile is drawn by the watcher instead.
const waiting = new Set();
const idleCallback = window.requestIdleCallback || ((run) => setTimeout(run, 50));

function later(div) {
  waiting.add(div);
  if (waiting.size === 1) idleCallback(drawLater);
}

function drawLater() {
  for (const div of waiting) {
    waiting.delete(div);
    if (div.__lensPending && div.isConnected && div.getClientRects().length && hidden(div)) {
      flush(div, true);
      break;
    }
  }
  if (waiting.size) idleCallback(drawLater);
}

const firstCandidates = new Set(); // charts that arrived before any was drawn
let firstFrames = 0;

function firstChart(div) {
  // The page's first chart is drawn wherever it is: at the next frame, the first in the page's order of those
  // that have arrived and are laid out (tried for a second of frames: an element may still be mounting when its
  // figure arrives). The watcher may find one in view first, which then is the first. A hidden one (in a closed
  // expander) is never laid out, and is not the first.
  firstCandidates.add(div);
  if (firstCandidates.size === 1) requestAnimationFrame(pickFirst);
}

function pickFirst() {
  const ready = [...firstCandidates].filter((d) => d.__lensPending && d.isConnected && d.getClientRects().length && !hidden(d));
  if (!startedAny && ready.length) {
    ready.sort((a, b) => (a.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_FOLLOWING ? -1 : 1));
    flush(ready[0]);
  }
  if (startedAny || ++firstFrames >= 60) firstCandidates.clear();
  else requestAnimationFrame(pickFirst);
}

function nearView(div) {
  // A chart the watcher has not reported on yet (it just arrived: a view opened, a step shown) that is within
  // NEAR of the screen: drawn now, in the task that placed it, not at the watcher's first report, a frame later
  // (the Query inspector's first visit at 64 tokens: the chart began 30-40 ms after the view was placed).
  if (!div.getClientRects().length || hidden(div)) return false;
  const box = div.getBoundingClientRect();
  const margin = window.innerHeight * NEAR_FRACTION;
  return box.bottom >= -margin && box.top <= window.innerHeight + margin;
}

function watch(div) {
  if (!watcher) {
    watcher = new IntersectionObserver(
      (entries) => {
        for (const entry of entries) {
          entry.target.__lensInView = entry.isIntersecting;
          if (entry.isIntersecting) flush(entry.target);
        }
      },
      { rootMargin: NEAR },
    );
    window.addEventListener("beforeprint", () => document.querySelectorAll(".lens-chart").forEach(flush));
  }
  watcher.observe(div); // its first report comes at the next frame: a new chart is drawn from there
}

export function render(component, settings, base, loads) {
  load = loads;
  const { parentElement, data } = component;
  if (parentElement.querySelector(".lens-follow")) return follow(component); // not a chart: ui/follow.py
  const div = parentElement.querySelector(".lens-chart");
  if (!div) return undefined;
  if (!div.__lensListening) {
    div.__lensListening = true;
    div.addEventListener("fullscreenchange", () => onFullScreen(div));
  }
  div.__lensComponent = component; // the latest: a click reports through it
  let arrived = null;
  try {
    arrived = received(data);
  } catch (err) {
    say(div, "This chart could not be read: " + err.message);
    return undefined;
  }
  if (!arrived) {
    // The page's first element (ui.chart.preload): nothing to draw; plotly.js is loading already (the loader
    // started it while the server is still computing, instead of when the first figure arrives).
    const box = parentElement.closest('[data-testid="stElementContainer"]');
    if (box) box.style.display = "none";
    plotly(settings, base, []).catch(() => {}); // a failure is said by the first chart that needs it
    return undefined;
  }
  if (arrived.rows) rememberRows(arrived.rows.digest, arrived.rows.read);
  if (div.__lensKey !== arrived.key) {
    div.__lensKey = arrived.key;
    div.__lensToken = (div.__lensToken || 0) + 1;
    const waiting = div.__lensPending;
    let figure = null;
    if (div.__lensFigureKey !== arrived.figureKey) {
      div.__lensFigureKey = arrived.figureKey;
      figure = parse(div, arrived);
      if (!figure) div.__lensFigureKey = undefined;
    } else if (waiting) figure = waiting.figure; // the same figure, still waiting to be drawn: drawn with this update
    const drawn = figure || div.classList.contains("js-plotly-plot");
    div.__lensPending = drawn ? { figure, update: arrived.update, token: div.__lensToken, settings, base } : null;
    if (div.__lensInView) flush(div);
    else if (startedAny && div.__lensInView === undefined && nearView(div)) flush(div);
    else if (!startedAny) {
      firstChart(div);
      if (div.__lensPending) later(div); // (a chart of a view kept hidden is not the first: drawn when idle)
    } else {
      // Out of view (or not yet known: the watcher's first report, at the next frame, draws a new chart that
      // is near the view at once). An older figure stays, faded, until then. In a view kept hidden: drawn
      // when the browser is idle.
      if (div.classList.contains("js-plotly-plot")) div.style.opacity = STALE_OPACITY;
      if (div.__lensPending) later(div);
    }
  } // else: the same figure as on screen (or already waiting), nothing to draw
  if (!div.__lensWatched) {
    div.__lensWatched = true;
    watch(div);
  }
  return () => {
    // Streamlit keeps only the latest cleanup and calls it once, when the chart leaves the page: what waited
    // to be drawn is dropped with it, and a draw already on its way finds a newer token and stops.
    div.__lensPending = null;
    div.__lensToken = (div.__lensToken || 0) + 1;
    div.__lensKey = div.__lensFigureKey = undefined; // should the same <div> be handed a figure again, it is drawn
    div.__lensShows = null;
    if (watcher) watcher.unobserve(div);
    if (window.Plotly) window.Plotly.purge(div);
  };
}
