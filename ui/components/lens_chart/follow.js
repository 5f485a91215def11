// The Query inspector's box and its step-through (ui/follow.py): a query chosen in the box is flipped to in the
// chart at once, from the rows the page holds (query_rows.js `div.__lensFlipTo`), while the server's run for the
// pick is under way; the server's figure for that query then draws nothing (query_rows.js `showsAlready`).
//
// `data` is JSON (as bytes) of {box, chart, live, chosen}: the CSS classes of the box's element, of the chart's and
// of the view's live temperature (ui/live_temperature.py), and the query the server chose. The box is a combobox
// whose text is its option's label, "i: token": a MutationObserver follows its value and aria-expanded attributes,
// and a value read while the list is closed is the choice (while it is open, the text is what the person types to
// filter the options). A pointer pressed on
// one of its options flips the chart already (`pressed`), a click's length before the choice is made; should the
// press end elsewhere, the list closes and the observer flips the chart back to the box's value.

const state = (window.__lensFollow ||= { data: null, input: null, observer: null, timer: 0, pressing: false });

function chosen(input) {
  if (input.getAttribute("aria-expanded") === "true") return null;
  const match = /^(\d+):/.exec(input.value);
  return match ? Number(match[1]) : null;
}

function apply() {
  const { data, input } = state;
  if (!data || !input) return;
  const i = chosen(input);
  if (i === null) return;
  clearTimeout(state.timer);
  // After the frame that closes the box's list is painted: Streamlit's message to the server has left, the page
  // is laid out again, and the chart is updated while the server runs (flipping to the query shown does nothing).
  requestAnimationFrame(() => (state.timer = setTimeout(() => (flipTo(i), liveTo(i)), 0)));
}

// The view's live temperature shows the chosen query's weights too, drawn while the server runs; the server's data
// for that query then draws nothing there (live_temperature.js `mount`). Not on a press: it would hold the release.
function liveTo(i) {
  const root = state.data && state.data.live && document.querySelector(`.${state.data.live} .lt-root`);
  if (root && root.__lt && typeof root.__lt.show === "function") root.__lt.show(i);
}

function flipTo(i) {
  const div = state.data && document.querySelector(`.${state.data.chart} .lens-chart`);
  if (div && typeof div.__lensFlipTo === "function") div.__lensFlipTo(i);
}

// A press on an option of the box's open list (its listbox is the one the box controls): "i: token" -> query i.
function pressed(event) {
  const { data, input } = state;
  if (!data || !input || input.getAttribute("aria-expanded") !== "true") return;
  const listbox = input.getAttribute("aria-controls");
  const option = event.target instanceof Element ? event.target.closest('[role="option"]') : null;
  if (!listbox || !option || !option.closest(`#${CSS.escape(listbox)}`)) return;
  const match = /^(\d+):/.exec(option.textContent.trim());
  if (match) flipTo(Number(match[1]));
}

function observe() {
  const input = document.querySelector(`.${state.data.box} input[role="combobox"]`);
  if (input === state.input) return;
  if (state.observer) state.observer.disconnect();
  state.input = input;
  state.observer = null;
  if (!input) return;
  state.observer = new MutationObserver(apply);
  state.observer.observe(input, { attributes: true, attributeFilter: ["value", "aria-expanded"] });
}

// The follow component's part of chart.js `render` (it is drawn by the chart's loader: ui/follow.py).
export function follow(component) {
  const element = component.parentElement.closest('[data-testid="stElementContainer"]');
  if (element) element.style.display = "none"; // it draws nothing
  let data = null;
  try {
    data = JSON.parse(new TextDecoder().decode(component.data)); // JSON, sent as bytes (ui/follow.py)
  } catch (err) {
    data = null;
  }
  if (!data || typeof data.box !== "string" || typeof data.chart !== "string") return undefined;
  state.data = data;
  observe();
  if (!state.pressing) {
    document.addEventListener("pointerdown", pressed, true); // once per page; it reads the current state
    state.pressing = true;
  }
  return () => {
    // the box's view without rows (display options on, a text too long) or gone: its choices are left alone
    if (state.data !== data) return;
    if (state.observer) state.observer.disconnect();
    clearTimeout(state.timer);
    Object.assign(state, { data: null, input: null, observer: null });
  };
}
