// The inline part of the lens chart (ui/chart.py): Streamlit sends a component's inline JavaScript with
// every element, so this stays small and imports the chart itself (chart.js) once per page from the
// app's own server.

const SETTINGS = __LENS_SETTINGS__; // {module, plotly: [routes, best first], config}
let chart = null;

function baseUrl() {
  // Streamlit's own bundle is served from <base>/static/js/index.<hash>.js: the app's base URL is
  // what comes before "static/", whatever path the app is served under.
  const own = [...document.querySelectorAll("script[src]")].find((s) => /\/static\/js\/index\.[^/]*\.js/.test(s.src));
  if (own) return own.src.replace(/static\/js\/index\.[^/]*\.js.*$/, "");
  return new URL(".", window.location.href).href;
}

export default function (component) {
  const base = baseUrl();
  chart = chart || import(base + SETTINGS.module);
  return chart
    .then((module) => module.render(component, SETTINGS, base))
    .catch((err) => {
      chart = null; // the next rerun tries again
      const div = component.parentElement.querySelector(".lens-chart");
      if (div) div.textContent = "This chart could not be drawn: " + err.message;
    });
}
