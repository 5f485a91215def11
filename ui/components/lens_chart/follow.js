// The Query inspector's box and its step-through (ui/follow.py): a query chosen in the box is flipped to in the
// chart at once, from the rows the page holds (query_rows.js `div.__lensFlipTo`), while the server's run for the
// pick is under way; the server's figure for that query then draws nothing (query_rows.js `showsAlready`).
//
// `data` is JSON (as bytes) of {box, chart, chosen}: the CSS classes of the box's element and of the chart's,
// and the query the server chose. The box is a combobox whose text is its option's label, "i: token": a
// MutationObserver follows its value and aria-expanded attributes, and a value read while the list is closed is
// the choice (while it is open, the text is what the person types to filter the options).

const state = (window.__lensFollow ||= { data: null, input: null, observer: null, timer: 0 });

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
  // is laid out again, and the chart is updated while the server runs.
  const flip = () => {
    const div = document.querySelector(`.${data.chart} .lens-chart`);
    if (div && typeof div.__lensFlipTo === "function") div.__lensFlipTo(i);
  };
  requestAnimationFrame(() => (state.timer = setTimeout(flip, 0)));
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
  return () => {
    // the box's view without rows (display options on, a text too long) or gone: its choices are left alone
    if (state.data !== data) return;
    if (state.observer) state.observer.disconnect();
    clearTimeout(state.timer);
    Object.assign(state, { data: null, input: null, observer: null });
  };
}
