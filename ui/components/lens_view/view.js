// Keeps <body data-lens-view="..."> on the view the View control shows (ui/switch.py): the CSS that shows one view
// and hides the others keys on it, so a click shows its view in the click's own frame, before the server answers.
//
// `data` is JSON (as bytes) of {views, control, chosen, default}: the views in the control's order, the CSS class
// of the control's element, the server's choice and the view shown when no option is chosen (a second click on the
// chosen option clears it). A MutationObserver on the control follows its options' aria-checked, which React sets in the task
// of the click (the observer's callback runs before that task ends, so the frame the click paints shows the view).

const ATTRIBUTE = "data-lens-view";
const state = (window.__lensView ||= { data: null, control: null, observer: null });

function shown() {
  const data = state.data;
  const group = state.control && state.control.querySelector('[role="radiogroup"]');
  const options = group ? [...group.querySelectorAll('[role="radio"]')] : [];
  if (options.length !== data.views.length) return data.chosen; // not (yet) the control this was made for
  const index = options.findIndex((option) => option.getAttribute("aria-checked") === "true");
  return index >= 0 ? data.views[index] : data.default;
}

function apply() {
  if (!state.data) return;
  const view = shown();
  if (document.body.getAttribute(ATTRIBUTE) !== view) document.body.setAttribute(ATTRIBUTE, view);
}

function observe() {
  const control = document.querySelector("." + state.data.control);
  if (control === state.control) return;
  if (state.observer) state.observer.disconnect();
  state.control = control;
  state.observer = null;
  if (!control) return;
  state.observer = new MutationObserver(apply);
  state.observer.observe(control, { attributes: true, attributeFilter: ["aria-checked"], childList: true, subtree: true });
}

function text(data) {
  if (typeof data === "string") return data;
  if (data instanceof ArrayBuffer) return new TextDecoder().decode(new Uint8Array(data));
  if (ArrayBuffer.isView(data)) return new TextDecoder().decode(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  return "null";
}

export default function (component) {
  const element = component.parentElement.closest('[data-testid="stElementContainer"]');
  if (element) element.style.display = "none"; // it draws nothing
  let data = null;
  try {
    data = JSON.parse(text(component.data)); // JSON, sent as bytes (ui/switch.py)
  } catch (err) {
    data = null;
  }
  if (!data || !Array.isArray(data.views)) return undefined;
  state.data = data;
  observe();
  apply();
  return undefined;
}
