// The inline part of the lens chart (ui/chart.py): Streamlit sends a component's inline JavaScript with
// every element, so this stays small and imports the chart itself (chart.js) once per page from the
// app's own server. baseUrl() comes from ../base_url.js (ui/chart.py puts it in front).

const SETTINGS = __LENS_SETTINGS__; // {module, plotly: [routes, best first], config}
let chart = null;

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
