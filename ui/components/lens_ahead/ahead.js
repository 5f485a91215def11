// Asks the server to draw the views kept in the page ahead of a switch, while the person reads (ui/ahead.py).
//
// What arrives from Python (`data`): {pending: [the kept views not in the page for what is shown now], answered:
// the asks answered so far (so that every answer is a new render, even when the list stays the same)}.
// The page asks (the "ask" trigger) once nobody has touched it for IDLE_MS and nothing on it has changed for as
// long (no run, no element added or removed); after an ask that was answered with no click in between, a
// shorter GAP_MS of quiet is enough for the next view. A click or key press (not inside a chart) makes it ask
// again after the next pause even when the list said nothing was left: a head change redraws only the view
// shown, and the views kept hidden are stale then. A page clicked faster than IDLE_MS (the load test: a click 0.1 s after each
// answer) never asks.

const IDLE_MS = __IDLE_MS__;
const GAP_MS = __GAP_MS__;
const POLL_MS = 200;

const state = (window.__lensAhead ||= {
  component: null,
  wanted: false, // something may be left to draw
  lastInput: 0,
  lastChange: 0,
  askedAt: -1,
  asks: 0,
  asking: false, // an ask sent, its answer (the next list) not yet here
  pending: [],
  ready: false,
});

function running() {
  return !!document.querySelector('[data-testid="stStatusWidget"]');
}

function check() {
  const now = performance.now();
  if (running()) state.lastChange = now;
  if (!state.wanted || !state.component || document.hidden) return;
  if (now - state.lastInput < IDLE_MS) return;
  const touched = state.lastInput > state.askedAt; // a click since the last ask: a full pause first
  if (now - state.lastChange < (touched ? IDLE_MS : GAP_MS)) return;
  state.wanted = false;
  state.asking = true;
  state.askedAt = now;
  state.component.setTriggerValue("ask", ++state.asks);
}

function setUp() {
  if (state.ready) return;
  state.ready = true;
  const input = (event) => {
    state.lastInput = performance.now();
    // A click inside a chart (its statistic buttons, its head slider, hover) changes nothing on the server: the
    // page asks only when its list says so. Any other click or key may have changed what the views show.
    const target = event.target;
    if (!(target && target.closest && target.closest(".js-plotly-plot"))) state.wanted = true;
  };
  document.addEventListener("pointerdown", input, true);
  document.addEventListener("keydown", input, true);
  new MutationObserver(() => (state.lastChange = performance.now())).observe(document.body, {
    childList: true,
    subtree: true,
  });
  setInterval(check, POLL_MS);
}

export default function (component) {
  const box = component.parentElement.closest('[data-testid="stElementContainer"]');
  if (box) box.style.display = "none"; // it draws nothing
  state.component = component;
  const pending = (component.data && component.data.pending) || [];
  state.pending = pending;
  state.wanted = pending.length > 0;
  state.asking = false;
  state.lastChange = performance.now();
  setUp();
}
