// The inline part of the live temperature (ui/live_temperature.py): Streamlit sends a component's inline
// JavaScript with every element, so this stays small. It adds the widget's script (live_temperature.js, served by
// the app's own server) to the page once and hands it each rerun's data; a release comes back as the "release"
// trigger. baseUrl() comes from ../base_url.js (ui/chart.py's inline_js puts it in front).

const SOURCE = "__LT_SOURCE__"; // component/<name>/live_temperature.js
let loading = null;

function load() {
  if (window.LiveTemperature && window.LiveTemperature.mount) return Promise.resolve(window.LiveTemperature);
  loading = loading || new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = baseUrl() + SOURCE;
    script.onload = () => resolve(window.LiveTemperature);
    script.onerror = () => {
      loading = null; // the next rerun tries again
      reject(new Error("its script did not load"));
    };
    document.head.appendChild(script);
  });
  return loading;
}

export default function (component) {
  const { parentElement, data, setTriggerValue } = component;
  const root = parentElement.querySelector(".lt-root");
  if (!root) return undefined;
  return load()
    .then((widget) => {
      widget.mount(root, data, (value) => setTriggerValue("release", value));
    })
    .catch((err) => {
      root.textContent = "The live temperature could not draw: " + err.message;
    });
}
