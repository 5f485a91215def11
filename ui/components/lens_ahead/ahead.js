// Asks the server to draw the views kept in the page ahead of a switch, while the person reads (ui/ahead.py).
//
// Each kept view's fragment draws one of these (drawing nothing itself): `data` is {view, box, look, wants, order,
// declined}: the view, the class of its box (app.py), what it shows (`look`, null when it is not in the page), what
// each kept view must show as that fragment ran (`wants`: view -> look; a view's look leaves out the view-only
// settings it does not show, ui/ahead.py NOT_SHOWN), its place in the views' order, and how many asks the server
// turned down (busy with other sessions). The view shown is the one whose box is not hidden (the inherited
// --lens-hidden). Every other view whose look is not the one the view shown wants for it (not drawn, or stale after
// a head change) is pending.
// Once nobody has clicked or pressed a key for IDLE_MS and nothing in the page has changed for as long (no run, no
// element added or removed), the first pending view is asked for (its "ask" trigger: the server reruns that view's
// own fragment, which draws it hidden). With no click since the last ask, GAP_MS of quiet is enough for the next.
// The server turns an ask down while another session's run is in progress (the view's asker comes back with a
// new `declined` count): the page waits BUSY_MS before it asks again, twice as long after each such answer (up to
// 8 times), until the next click.
// A page clicked faster than IDLE_MS (the load test: a click 0.1 s after each answer) never asks.

const IDLE_MS = __IDLE_MS__;
const GAP_MS = __GAP_MS__;
const BUSY_MS = __BUSY_MS__; // after an ask the server turned down (busy with other sessions)
const ANSWER_AFTER_INPUT_MS = 5000; // a click that changed nothing in the page counts as answered after this
const POLL_MS = 200;
const ANSWER_MS = 15000; // an ask not answered by then (the run was replaced by another) may be asked again

const state = (window.__lensAhead ||= {
  askers: new Map(), // view -> {component, data}
  lastInput: 0,
  lastChange: 0,
  askedAt: -1,
  asking: null, // [view, look asked for, declined count] until that view's asker is drawn again
  busyUntil: 0,
  declines: 0, // asks turned down in a row since the last click: the wait doubles each time
  asks: 0,
  ready: false,
});

function running() {
  return !!document.querySelector('[data-testid="stStatusWidget"]');
}

function shownView() {
  for (const [view, asker] of state.askers) {
    const box = document.querySelector("." + asker.data.box);
    if (box && getComputedStyle(box).getPropertyValue("--lens-hidden").trim() !== "1") return view;
  }
  return null;
}

// What each view must show now: what the view shown wants, unless another view's fragment ran for a later run of the
// numbers panel (a look begins with that run's number, ui/ahead.py `look`). A scaling or mask click on the derivation
// reruns its steps 4-7 alone, not its asker, so what the derivation's asker wants is one run behind; the views
// cleared or drawn ahead after it want the newer one, and they, not the derivation, say what to catch up with.
const runOf = (wants) => parseInt(Object.values(wants)[0], 10);

function currentWants(shown) {
  const { look, wants } = state.askers.get(shown).data;
  if (!look || !wants) return null; // (the view shown not in the page)
  let current = wants;
  for (const asker of state.askers.values()) {
    if (asker.data.wants && runOf(asker.data.wants) > runOf(current)) current = asker.data.wants;
  }
  return current;
}
state.currentWants = currentWants;

// The views to draw ahead, in their order (tests read it: window.__lensAhead.pending()).
function pending() {
  const shown = shownView();
  const current = shown && currentWants(shown);
  if (!current) return [];
  return [...state.askers.values()]
    .filter((a) => a.data.view !== shown && a.data.look !== current[a.data.view])
    .sort((a, b) => a.data.order - b.data.order)
    .map((a) => a.data.view);
}
state.pending = pending;

function check() {
  const now = performance.now();
  if (running()) state.lastChange = now;
  if (document.hidden) return;
  if (state.asking) {
    const [view, look, declined] = state.asking;
    const asker = state.askers.get(view);
    const same = asker && asker.data.look === look;
    if (same && asker.data.declined === declined && now - state.askedAt < ANSWER_MS) return; // not answered yet
    if (same) state.busyUntil = now + BUSY_MS * 2 ** Math.min(state.declines++, 3); // turned down: 3, 6, 12, 24 s
    state.asking = null;
  }
  if (now < state.busyUntil || now - state.lastInput < IDLE_MS) return;
  if (state.lastInput > state.askedAt) {
    // A click since the last ask: a full pause first, counted from the page's answer to it (a server slow to start
    // that answer leaves the page quiet meanwhile), or from the click when nothing in the page changed after it.
    const answered = state.lastChange > state.lastInput || now - state.lastInput >= ANSWER_AFTER_INPUT_MS;
    if (!answered || now - state.lastChange < IDLE_MS) return;
  } else if (now - state.lastChange < GAP_MS) return;
  const next = pending()[0];
  if (!next) return;
  const asker = state.askers.get(next);
  state.asking = [next, asker.data.look, asker.data.declined];
  state.askedAt = now;
  asker.component.setTriggerValue("ask", ++state.asks);
}

function setUp() {
  if (state.ready) return;
  state.ready = true;
  const input = () => {
    state.lastInput = performance.now();
    state.declines = 0;
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
  const element = component.parentElement.closest('[data-testid="stElementContainer"]');
  if (element) element.style.display = "none"; // it draws nothing
  const data = component.data || {};
  if (!data.view) return undefined;
  const asker = { component, data };
  state.askers.set(data.view, asker);
  state.lastChange = performance.now();
  setUp();
  return () => {
    if (state.askers.get(data.view) === asker) state.askers.delete(data.view); // its view's fragment drew none
  };
}
